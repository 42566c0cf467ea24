package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/knowledge"
)

type statsFlags struct {
	orgFlags
	top int
}

func (f *statsFlags) define(fs *flag.FlagSet) {
	f.orgFlags.define(fs)
	fs.IntVar(&f.top, "top-tags", 10, "how many of the most used tags to show (1..100)")
}

func runStats(e *env, f *statsFlags) error {
	orgID, err := f.orgID()
	if err != nil {
		return err
	}
	if f.top < 1 || f.top > 100 {
		return usagef("--top-tags: %d is not between 1 and 100", f.top)
	}
	t, err := e.tenancy()
	if err != nil {
		return err
	}
	if _, err := t.Quotas(e.ctx, orgID); err != nil { // the org must exist
		return err
	}
	svc, err := e.knowledge()
	if err != nil {
		return err
	}
	// The same numbers as the knowledge://stats resource.
	st, err := svc.Operations().Stats(e.ctx, orgID, f.top)
	if err != nil {
		return err
	}
	return e.print(st, func(w io.Writer) { printStats(w, orgID, st) })
}

func printStats(w io.Writer, orgID uuid.UUID, st *knowledge.OrgStats) {
	fmt.Fprintf(w, "org %s: %d entries (%d current, %d superseded, %d expired), %d forgotten\n", orgID, st.Entries, st.Heads, st.Superseded, st.Expired, st.Forgotten)
	fmt.Fprintf(w, "current by kind:")
	for _, k := range knowledge.Kinds {
		fmt.Fprintf(w, " %s %d", k, st.ByKind[k])
	}
	fmt.Fprintf(w, "\ndocuments: %d live, %d current sections; uploads in parts: %d open, %d bytes staged\n",
		st.Documents, st.Sections, st.Uploads.Open, st.Uploads.StagedBytes)
	em := st.Embeddings
	fmt.Fprintf(w, "embeddings: %d ready, %d pending (oldest %.0f s), %d failed\n", em.Ready, em.Pending, em.OldestPendingSeconds, em.Failed)
	for m, n := range em.ReadyByModel {
		fmt.Fprintf(w, "  model %s: %d\n", m, n)
	}
	for _, q := range st.Quotas {
		limit := "unlimited"
		if q.Limit != nil {
			limit = fmt.Sprint(*q.Limit)
		}
		fmt.Fprintf(w, "quota %s: %d used of %s\n", q.Resource, q.Used, limit)
	}
	if len(st.RateLimits) == 0 {
		fmt.Fprintln(w, "rate limits: the MCP server's defaults")
	}
	for _, l := range st.RateLimits {
		who := "the org (all agents)"
		if l.Scope == "agent" {
			who = "each agent"
			if l.AgentID != nil {
				who = "agent " + st.AgentNames[l.AgentID.String()]
			}
		}
		per := "unlimited"
		if l.PerMinute != nil {
			per = fmt.Sprintf("%d a minute", *l.PerMinute)
		}
		fmt.Fprintf(w, "rate limit, %ss of %s: %s\n", l.Kind, who, per)
	}
	fmt.Fprintf(w, "lexical index: %d indexed, %d queued (%s)\n", st.Index.Indexed, st.Index.Queued, st.Index.TextSearchConfig)
	fmt.Fprintf(w, "open relations: %d\n", st.OpenRelations)
	for _, r := range st.RelationsByType {
		fmt.Fprintf(w, "  %s: %d\n", r.Type, r.Count)
	}
	for _, tg := range st.TopTags {
		fmt.Fprintf(w, "tag %s: %d\n", tg.Tag, tg.Entries)
	}
	for _, a := range st.PerAgent {
		name := "(no agent)"
		if a.AgentID != nil {
			name = st.AgentNames[a.AgentID.String()]
			if name == "" {
				name = a.AgentID.String()
			}
		}
		fmt.Fprintf(w, "agent %s: %d\n", name, a.Entries)
	}
	fmt.Fprintf(w, "(read in %.1f ms)\n", st.ElapsedMs)
}
