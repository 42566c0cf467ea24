package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/agentfleet/orchestrator/packages/tenancy"
)

func init() {
	register("dev bootstrap", "for local development: make sure an org and agent exist, issue a read+write token", func(fs *flag.FlagSet) func(e *env) error {
		orgName := fs.String("org-name", "dev", "org name (reused when it exists)")
		agentName := fs.String("agent-name", "dev-agent", "agent name (reused when it exists)")
		ttl := fs.Duration("ttl", 24*time.Hour, "token lifetime")
		return func(e *env) error {
			t, err := e.tenancy()
			if err != nil {
				return err
			}
			org, err := t.CreateOrg(e.ctx, *orgName)
			if errors.Is(err, tenancy.ErrConflict) {
				orgs, lerr := t.ListOrgs(e.ctx)
				if lerr != nil {
					return lerr
				}
				for i := range orgs {
					if orgs[i].Name == *orgName {
						org, err = &orgs[i], nil
					}
				}
			}
			if err != nil {
				return err
			}
			agent, err := t.CreateAgent(e.ctx, org.ID, *agentName)
			if errors.Is(err, tenancy.ErrConflict) {
				agents, lerr := t.ListAgents(e.ctx, org.ID)
				if lerr != nil {
					return lerr
				}
				for i := range agents {
					if agents[i].Name == *agentName {
						agent, err = &agents[i], nil
					}
				}
			}
			if err != nil {
				return err
			}
			tok, err := t.IssueToken(e.ctx, org.ID, agent.ID, tenancy.Catalogue, *ttl)
			if err != nil {
				return err
			}
			return e.print(map[string]any{"orgId": org.ID, "agentId": agent.ID, "tokenId": tok.ID, "token": tok.Token}, func(w io.Writer) {
				fmt.Fprintf(w, "org %s\nagent %s\ntoken %s\n", org.ID, agent.ID, tok.Token)
			})
		}
	})
}
