package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/tenancy"
)

func init() {
	register("org create", "create an org: --name N", func(fs *flag.FlagSet) func(e *env) error {
		name := fs.String("name", "", "org name (unique)")
		return func(e *env) error {
			if err := required("name", *name); err != nil {
				return err
			}
			t, err := e.tenancy()
			if err != nil {
				return err
			}
			o, err := t.CreateOrg(e.ctx, *name)
			if err != nil {
				return err
			}
			return e.print(map[string]any{"id": o.ID, "name": o.Name}, func(w io.Writer) {
				fmt.Fprintf(w, "org %s created: %s\n", o.Name, o.ID)
			})
		}
	})
	register("org list", "list orgs", func(fs *flag.FlagSet) func(e *env) error {
		return func(e *env) error {
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
	})
	register("agent create", "create an agent: --org ORG --name N", func(fs *flag.FlagSet) func(e *env) error {
		org := fs.String("org", "", "org id")
		name := fs.String("name", "", "agent name (unique in the org)")
		return func(e *env) error {
			orgID, err := uuidFlag("org", *org)
			if err != nil {
				return err
			}
			if err := required("name", *name); err != nil {
				return err
			}
			t, err := e.tenancy()
			if err != nil {
				return err
			}
			a, err := t.CreateAgent(e.ctx, orgID, *name)
			if err != nil {
				return err
			}
			return e.print(map[string]any{"id": a.ID, "orgId": a.OrgID, "name": a.Name}, func(w io.Writer) {
				fmt.Fprintf(w, "agent %s created: %s\n", a.Name, a.ID)
			})
		}
	})
	register("agent list", "list an org's agents: --org ORG", func(fs *flag.FlagSet) func(e *env) error {
		org := fs.String("org", "", "org id")
		return func(e *env) error {
			orgID, err := uuidFlag("org", *org)
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
	})
	register("token create", "issue a token: --org ORG --agent AGENT --scopes S1,S2 [--ttl 720h]", func(fs *flag.FlagSet) func(e *env) error {
		org := fs.String("org", "", "org id")
		agent := fs.String("agent", "", "agent id")
		scopes := fs.String("scopes", "", "comma-separated scopes: "+strings.Join(tenancy.Catalogue, ","))
		ttl := fs.Duration("ttl", 0, "lifetime, e.g. 720h (default: no expiry)")
		return func(e *env) error {
			orgID, err := uuidFlag("org", *org)
			if err != nil {
				return err
			}
			agentID, err := uuidFlag("agent", *agent)
			if err != nil {
				return err
			}
			list, err := tenancy.ParseScopes(*scopes)
			if err != nil {
				return err
			}
			if *ttl < 0 {
				return usagef("--ttl must not be negative")
			}
			t, err := e.tenancy()
			if err != nil {
				return err
			}
			tok, err := t.IssueToken(e.ctx, orgID, agentID, list, *ttl)
			if err != nil {
				return err
			}
			return e.print(map[string]any{"id": tok.ID, "token": tok.Token}, func(w io.Writer) {
				fmt.Fprintf(w, "token %s issued (shown once, keep it safe):\n%s\n", tok.ID, tok.Token)
			})
		}
	})
	register("token revoke", "revoke a token: --id ID [--org ORG]", func(fs *flag.FlagSet) func(e *env) error {
		id := fs.String("id", "", "token id")
		org := fs.String("org", "", "org id (optional check)")
		return func(e *env) error {
			tokID, err := uuidFlag("id", *id)
			if err != nil {
				return err
			}
			var orgID *uuid.UUID
			if *org != "" {
				o, err := uuidFlag("org", *org)
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
	})
	register("token list", "list an org's tokens (never their text): --org ORG", func(fs *flag.FlagSet) func(e *env) error {
		org := fs.String("org", "", "org id")
		return func(e *env) error {
			orgID, err := uuidFlag("org", *org)
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
	})
	register("quota set", "set a quota: --org ORG --knowledge-stored N|unlimited", func(fs *flag.FlagSet) func(e *env) error {
		org := fs.String("org", "", "org id")
		stored := fs.String("knowledge-stored", "", "how many entries the org may store, or unlimited (-1 is still taken for unlimited)")
		return func(e *env) error {
			orgID, err := uuidFlag("org", *org)
			if err != nil {
				return err
			}
			// unlimited, as ctl ratelimit and the MCP_RATE_* variables take
			// it: every limit an operator sets is a number or unlimited.
			var limit *int64
			switch *stored {
			case "":
				return usagef("--knowledge-stored is required: how many entries the org may store, or unlimited")
			case "unlimited", "-1":
			default:
				n, err := strconv.ParseInt(*stored, 10, 64)
				if err != nil || n < 0 {
					return usagef("--knowledge-stored must be a whole number of entries (0 or more), or unlimited (got %q)", *stored)
				}
				limit = &n
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
	})
	register("quota show", "show an org's quotas: --org ORG", func(fs *flag.FlagSet) func(e *env) error {
		org := fs.String("org", "", "org id")
		return func(e *env) error {
			orgID, err := uuidFlag("org", *org)
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
	})
	register("task create", "create a task (stand-in for the orchestrator): --org ORG --title T", func(fs *flag.FlagSet) func(e *env) error {
		org := fs.String("org", "", "org id")
		title := fs.String("title", "", "task title")
		return func(e *env) error {
			orgID, err := uuidFlag("org", *org)
			if err != nil {
				return err
			}
			if err := required("title", *title); err != nil {
				return err
			}
			t, err := e.tenancy()
			if err != nil {
				return err
			}
			task, err := t.CreateTask(e.ctx, orgID, *title)
			if err != nil {
				return err
			}
			return e.print(map[string]any{"id": task.ID, "title": task.Title}, func(w io.Writer) {
				fmt.Fprintf(w, "task created: %s\n", task.ID)
			})
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
