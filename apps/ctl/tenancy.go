package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// Orgs, agents, tokens, quotas and tasks: each command one call of
// tenancy.Service.

type orgCreateFlags struct{ name string }

func (f *orgCreateFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&f.name, "name", "", "org name (unique)")
}

func runOrgCreate(e *env, f *orgCreateFlags) error {
	if err := required("name", f.name); err != nil {
		return err
	}
	t, err := e.tenancy()
	if err != nil {
		return err
	}
	o, err := t.CreateOrg(e.ctx, f.name)
	if err != nil {
		return err
	}
	return e.print(map[string]any{"id": o.ID, "name": o.Name}, func(w io.Writer) {
		fmt.Fprintf(w, "org %s created: %s\n", o.Name, o.ID)
	})
}

func runOrgList(e *env, _ *noFlags) error {
	t, err := e.tenancy()
	if err != nil {
		return err
	}
	orgs, err := t.ListOrgs(e.ctx)
	if err != nil {
		return err
	}
	return e.print(map[string]any{"orgs": orgs}, func(w io.Writer) {
		for _, o := range orgs {
			fmt.Fprintf(w, "%s  %s\n", o.ID, o.Name)
		}
	})
}

type agentCreateFlags struct {
	orgFlags
	name string
}

func (f *agentCreateFlags) define(fs *flag.FlagSet) {
	f.orgFlags.define(fs)
	fs.StringVar(&f.name, "name", "", "agent name (unique in the org)")
}

func runAgentCreate(e *env, f *agentCreateFlags) error {
	orgID, err := f.orgID()
	if err != nil {
		return err
	}
	if err := required("name", f.name); err != nil {
		return err
	}
	t, err := e.tenancy()
	if err != nil {
		return err
	}
	a, err := t.CreateAgent(e.ctx, orgID, f.name)
	if err != nil {
		return err
	}
	return e.print(map[string]any{"id": a.ID, "orgId": a.OrgID, "name": a.Name}, func(w io.Writer) {
		fmt.Fprintf(w, "agent %s created: %s\n", a.Name, a.ID)
	})
}

func runAgentList(e *env, f *orgFlags) error {
	orgID, err := f.orgID()
	if err != nil {
		return err
	}
	t, err := e.tenancy()
	if err != nil {
		return err
	}
	agents, err := t.ListAgents(e.ctx, orgID)
	if err != nil {
		return err
	}
	return e.print(map[string]any{"agents": agents}, func(w io.Writer) {
		for _, a := range agents {
			fmt.Fprintf(w, "%s  %s\n", a.ID, a.Name)
		}
	})
}

type tokenCreateFlags struct {
	orgFlags
	agent, scopes string
	ttl           time.Duration
}

func (f *tokenCreateFlags) define(fs *flag.FlagSet) {
	f.orgFlags.define(fs)
	fs.StringVar(&f.agent, "agent", "", "agent id")
	fs.StringVar(&f.scopes, "scopes", "", "comma-separated scopes: "+strings.Join(tenancy.Catalogue, ","))
	fs.DurationVar(&f.ttl, "ttl", 0, "lifetime, e.g. 720h (default: no expiry)")
}

func runTokenCreate(e *env, f *tokenCreateFlags) error {
	orgID, err := f.orgID()
	if err != nil {
		return err
	}
	agentID, err := uuidFlag("agent", f.agent)
	if err != nil {
		return err
	}
	list, err := tenancy.ParseScopes(f.scopes)
	if err != nil {
		return err
	}
	if f.ttl < 0 {
		return usagef("--ttl must not be negative")
	}
	t, err := e.tenancy()
	if err != nil {
		return err
	}
	tok, err := t.IssueToken(e.ctx, orgID, agentID, list, f.ttl)
	if err != nil {
		return err
	}
	return e.print(map[string]any{"id": tok.ID, "token": tok.Token}, func(w io.Writer) {
		fmt.Fprintf(w, "token %s issued (shown once, keep it safe):\n%s\n", tok.ID, tok.Token)
	})
}

type tokenRevokeFlags struct{ id, org string }

func (f *tokenRevokeFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&f.id, "id", "", "token id")
	fs.StringVar(&f.org, "org", "", "org id (optional check)")
}

func runTokenRevoke(e *env, f *tokenRevokeFlags) error {
	tokID, err := uuidFlag("id", f.id)
	if err != nil {
		return err
	}
	var orgID *uuid.UUID
	if f.org != "" {
		o, err := uuidFlag("org", f.org)
		if err != nil {
			return err
		}
		orgID = &o
	}
	t, err := e.tenancy()
	if err != nil {
		return err
	}
	tok, err := t.RevokeToken(e.ctx, orgID, tokID)
	if err != nil {
		return err
	}
	return e.print(tok, func(w io.Writer) {
		fmt.Fprintf(w, "token %s revoked at %s\n", tok.ID, tok.RevokedAt.Format(time.RFC3339))
	})
}

func runTokenList(e *env, f *orgFlags) error {
	orgID, err := f.orgID()
	if err != nil {
		return err
	}
	t, err := e.tenancy()
	if err != nil {
		return err
	}
	toks, err := t.ListTokens(e.ctx, orgID)
	if err != nil {
		return err
	}
	return e.print(map[string]any{"tokens": toks}, func(w io.Writer) {
		for _, k := range toks {
			state := "active"
			switch {
			case k.RevokedAt != nil:
				state = "revoked"
			case k.ExpiresAt != nil && !time.Now().Before(*k.ExpiresAt):
				state = "expired"
			}
			fmt.Fprintf(w, "%s  agent %s  %-8s %s\n", k.ID, k.AgentID, state, strings.Join(k.Scopes, ","))
		}
	})
}

type quotaSetFlags struct {
	orgFlags
	stored string
}

func (f *quotaSetFlags) define(fs *flag.FlagSet) {
	f.orgFlags.define(fs)
	fs.StringVar(&f.stored, "knowledge-stored", "", "how many entries the org may store, or unlimited (-1 is taken for unlimited)")
}

// limit is --knowledge-stored: nil for unlimited, read by the rule of every
// limit an operator sets (tenancy.ParseLimit).
func (f *quotaSetFlags) limit() (*int64, error) {
	if f.stored == "" {
		return nil, usagef("--knowledge-stored is required: how many entries the org may store, or unlimited")
	}
	n, ok := tenancy.ParseLimit(f.stored)
	if !ok || (n != nil && *n < 0) {
		return nil, usagef("--knowledge-stored must be a whole number of entries (0 or more), or unlimited (got %q)", f.stored)
	}
	return n, nil
}

func runQuotaSet(e *env, f *quotaSetFlags) error {
	orgID, err := f.orgID()
	if err != nil {
		return err
	}
	limit, err := f.limit()
	if err != nil {
		return err
	}
	t, err := e.tenancy()
	if err != nil {
		return err
	}
	q, err := t.SetQuota(e.ctx, orgID, tenancy.ResourceKnowledgeStored, limit)
	if err != nil {
		return err
	}
	return e.print(q, func(w io.Writer) { printQuota(w, *q) })
}

func runQuotaShow(e *env, f *orgFlags) error {
	orgID, err := f.orgID()
	if err != nil {
		return err
	}
	t, err := e.tenancy()
	if err != nil {
		return err
	}
	qs, err := t.Quotas(e.ctx, orgID)
	if err != nil {
		return err
	}
	return e.print(map[string]any{"quotas": qs}, func(w io.Writer) {
		for _, q := range qs {
			printQuota(w, q)
		}
	})
}

func printQuota(w io.Writer, q tenancy.Quota) {
	limit := "unlimited"
	if q.Limit != nil {
		limit = fmt.Sprint(*q.Limit)
	}
	fmt.Fprintf(w, "%s: %d used of %s\n", q.Resource, q.Used, limit)
}

type taskCreateFlags struct {
	orgFlags
	title string
}

func (f *taskCreateFlags) define(fs *flag.FlagSet) {
	f.orgFlags.define(fs)
	fs.StringVar(&f.title, "title", "", "task title")
}

func runTaskCreate(e *env, f *taskCreateFlags) error {
	orgID, err := f.orgID()
	if err != nil {
		return err
	}
	if err := required("title", f.title); err != nil {
		return err
	}
	t, err := e.tenancy()
	if err != nil {
		return err
	}
	task, err := t.CreateTask(e.ctx, orgID, f.title)
	if err != nil {
		return err
	}
	return e.print(map[string]any{"id": task.ID, "title": task.Title}, func(w io.Writer) {
		fmt.Fprintf(w, "task created: %s\n", task.ID)
	})
}
