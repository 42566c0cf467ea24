package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// ctl ratelimit: the operators' rate limit settings (docs/mcp.md, "Rate
// limits"). The rules of a setting live in tenancy; here flags become a
// tenancy.RateLimit.
func init() {
	target := func(fs *flag.FlagSet) func() (uuid.UUID, tenancy.RateLimit, error) {
		org := fs.String("org", "", "org id")
		agent := fs.String("agent", "", "agent id: a limit for this agent alone")
		each := fs.Bool("each-agent", false, "a limit for each agent of the org that has none of its own")
		kind := fs.String("kind", "", "read (search, get, resources) or write (store, supersede)")
		return func() (uuid.UUID, tenancy.RateLimit, error) {
			orgID, err := uuidFlag("org", *org)
			if err != nil {
				return orgID, tenancy.RateLimit{}, err
			}
			l := tenancy.RateLimit{Scope: tenancy.RateScopeOrg, Kind: *kind}
			switch {
			case *agent != "" && *each:
				return orgID, l, usagef("--agent and --each-agent exclude each other")
			case *agent != "":
				id, err := uuidFlag("agent", *agent)
				if err != nil {
					return orgID, l, err
				}
				l.Scope, l.AgentID = tenancy.RateScopeAgent, &id
			case *each:
				l.Scope = tenancy.RateScopeAgent
			}
			if *kind == "" {
				return orgID, l, usagef("--kind is required: read or write")
			}
			return orgID, l, nil
		}
	}
	register("ratelimit set", "set a rate limit: --org ORG [--agent AGENT | --each-agent] --kind read|write --per-minute N|unlimited", func(fs *flag.FlagSet) func(e *env) error {
		parse := target(fs)
		per := fs.String("per-minute", "", "calls a minute, or unlimited")
		return func(e *env) error {
			orgID, l, err := parse()
			if err != nil {
				return err
			}
			switch *per {
			case "":
				return usagef("--per-minute is required: calls a minute, or unlimited")
			case "unlimited":
			default:
				n, err := strconv.Atoi(*per)
				if err != nil {
					return usagef("--per-minute must be a whole number of calls a minute, or unlimited (got %q)", *per)
				}
				l.PerMinute = &n
			}
			t, err := e.tenancy()
			if err != nil {
				return err
			}
			out, err := t.SetRateLimit(e.ctx, orgID, l)
			if err != nil {
				return err
			}
			return e.print(out, func(w io.Writer) { printRateLimit(w, *out) })
		}
	})
	register("ratelimit clear", "remove a rate limit (the server's default applies again): --org ORG [--agent AGENT | --each-agent] --kind read|write", func(fs *flag.FlagSet) func(e *env) error {
		parse := target(fs)
		return func(e *env) error {
			orgID, l, err := parse()
			if err != nil {
				return err
			}
			t, err := e.tenancy()
			if err != nil {
				return err
			}
			removed, err := t.ClearRateLimit(e.ctx, orgID, l)
			if err != nil {
				return err
			}
			return e.print(map[string]bool{"removed": removed}, func(w io.Writer) {
				if removed {
					fmt.Fprintln(w, "removed; the server's default applies")
				} else {
					fmt.Fprintln(w, "there was no such setting; the server's default applies")
				}
			})
		}
	})
	register("ratelimit show", "show an org's rate limit settings: --org ORG", func(fs *flag.FlagSet) func(e *env) error {
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
			ls, err := t.RateLimits(e.ctx, orgID)
			if err != nil {
				return err
			}
			return e.print(map[string]any{"rateLimits": ls}, func(w io.Writer) {
				if len(ls) == 0 {
					fmt.Fprintln(w, "no settings: the server's defaults (MCP_RATE_*) apply")
				}
				for _, l := range ls {
					printRateLimit(w, l)
				}
			})
		}
	})
}

func printRateLimit(w io.Writer, l tenancy.RateLimit) {
	who := "the org (all agents together)"
	switch {
	case l.AgentID != nil:
		who = "agent " + l.AgentID.String()
	case l.Scope == tenancy.RateScopeAgent:
		who = "each agent"
	}
	per := "unlimited"
	if l.PerMinute != nil {
		per = strconv.Itoa(*l.PerMinute) + " a minute"
	}
	fmt.Fprintf(w, "%s: %ss %s\n", who, l.Kind, per)
}
