package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

type devBootstrapFlags struct {
	orgName, agentName string
	ttl                time.Duration
}

func (f *devBootstrapFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&f.orgName, "org-name", "dev", "org name (reused when it exists)")
	fs.StringVar(&f.agentName, "agent-name", "dev-agent", "agent name (reused when it exists)")
	fs.DurationVar(&f.ttl, "ttl", 24*time.Hour, "token lifetime")
}

func runDevBootstrap(e *env, f *devBootstrapFlags) error {
	t, err := e.tenancy()
	if err != nil {
		return err
	}
	org, err := t.CreateOrg(e.ctx, f.orgName)
	if errors.Is(err, errs.ErrConflict) {
		orgs, lerr := t.ListOrgs(e.ctx)
		if lerr != nil {
			return lerr
		}
		for i := range orgs {
			if orgs[i].Name == f.orgName {
				org, err = &orgs[i], nil
			}
		}
	}
	if err != nil {
		return err
	}
	agent, err := t.CreateAgent(e.ctx, org.ID, f.agentName)
	if errors.Is(err, errs.ErrConflict) {
		agents, lerr := t.ListAgents(e.ctx, org.ID)
		if lerr != nil {
			return lerr
		}
		for i := range agents {
			if agents[i].Name == f.agentName {
				agent, err = &agents[i], nil
			}
		}
	}
	if err != nil {
		return err
	}
	tok, err := t.IssueToken(e.ctx, org.ID, agent.ID, tenancy.Catalogue, f.ttl)
	if err != nil {
		return err
	}
	return e.print(map[string]any{"orgId": org.ID, "agentId": agent.ID, "tokenId": tok.ID, "token": tok.Token}, func(w io.Writer) {
		fmt.Fprintf(w, "org %s\nagent %s\ntoken %s\n", org.ID, agent.ID, tok.Token)
	})
}
