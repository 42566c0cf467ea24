package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// statsOutput is knowledge.OrgStats with what tenancy knows: quotas,
// agent names, and rate limits (none exist in this version).
type statsOutput struct {
	*knowledge.OrgStats
	Quotas     []tenancy.Quota   `json:"quotas"`
	AgentNames map[string]string `json:"agentNames"`
	RateLimits any               `json:"rateLimits"`
}

func init() {
	register("stats", "what an org holds: --org ORG [--top-tags N] (entries by state, embeddings, quota, tags, authors)", func(fs *flag.FlagSet) func(e *env) error {
		org := fs.String("org", "", "org id")
		top := fs.Int("top-tags", 10, "how many of the most used tags to show (1..100)")
		return func(e *env) error {
			orgID, err := uuidFlag("org", *org)
			if err != nil {
				return err
			}
			if *top < 1 || *top > 100 {
				return usagef("--top-tags: %d is not between 1 and 100", *top)
			}
			t, err := e.tenancy()
			if err != nil {
				return err
			}
			quotas, err := t.Quotas(e.ctx, orgID) // also: the org must exist
			if err != nil {
				return err
			}
			agents, err := t.ListAgents(e.ctx, orgID)
			if err != nil {
				return err
			}
			svc, err := e.knowledge()
			if err != nil {
				return err
			}
			st, err := svc.Stats(e.ctx, orgID, *top)
			if err != nil {
				return err
			}
			out := statsOutput{OrgStats: st, Quotas: quotas, AgentNames: map[string]string{}}
			for _, a := range agents {
				out.AgentNames[a.ID.String()] = a.Name
			}
			return e.print(out, func(w io.Writer) {
				fmt.Fprintf(w, "org %s: %d entries (%d current, %d superseded, %d expired)\n", orgID, st.Entries, st.Heads, st.Superseded, st.Expired)
				em := st.Embeddings
				fmt.Fprintf(w, "embeddings: %d ready, %d pending (oldest %.0f s), %d failed\n", em.Ready, em.Pending, em.OldestPendingSeconds, em.Failed)
				for m, n := range em.ReadyByModel {
					fmt.Fprintf(w, "  model %s: %d\n", m, n)
				}
				for _, q := range quotas {
					limit := "unlimited"
					if q.Limit != nil {
						limit = fmt.Sprint(*q.Limit)
					}
					fmt.Fprintf(w, "quota %s: %d used of %s\n", q.Resource, q.Used, limit)
				}
				fmt.Fprintln(w, "rate limits: none in this version")
				fmt.Fprintf(w, "lexical index: %d indexed, %d queued (%s)\n", st.Index.Indexed, st.Index.Queued, st.Index.TextSearchConfig)
				for _, tg := range st.TopTags {
					fmt.Fprintf(w, "tag %s: %d\n", tg.Tag, tg.Entries)
				}
				for _, a := range st.PerAgent {
					name := "(no agent)"
					if a.AgentID != nil {
						name = out.AgentNames[a.AgentID.String()]
						if name == "" {
							name = a.AgentID.String()
						}
					}
					fmt.Fprintf(w, "agent %s: %d\n", name, a.Entries)
				}
				fmt.Fprintf(w, "(read in %.1f ms)\n", st.ElapsedMs)
			})
		}
	})
}
