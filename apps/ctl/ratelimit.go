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

// rateTargetFlags say which setting: the org's, an agent's, or each agent's,
// of one kind.
type rateTargetFlags struct {
	orgFlags
	agent, kind string
	each        bool
}

func (f *rateTargetFlags) define(fs *flag.FlagSet) {
	f.orgFlags.define(fs)
	fs.StringVar(&f.agent, "agent", "", "agent id: a limit for this agent alone")
	fs.BoolVar(&f.each, "each-agent", false, "a limit for each agent of the org that has none of its own")
	fs.StringVar(&f.kind, "kind", "", "read (search, get, resources) or write (store, supersede)")
}

func (f *rateTargetFlags) target() (uuid.UUID, tenancy.RateLimit, error) {
	orgID, err := f.orgID()
	if err != nil {
		return orgID, tenancy.RateLimit{}, err
	}
	l := tenancy.RateLimit{Scope: tenancy.RateScopeOrg, Kind: f.kind}
	switch {
	case f.agent != "" && f.each:
		return orgID, l, usagef("--agent and --each-agent exclude each other")
	case f.agent != "":
		id, err := uuidFlag("agent", f.agent)
		if err != nil {
			return orgID, l, err
		}
		l.Scope, l.AgentID = tenancy.RateScopeAgent, &id
	case f.each:
		l.Scope = tenancy.RateScopeAgent
	}
	if f.kind == "" {
		return orgID, l, usagef("--kind is required: read or write")
	}
	return orgID, l, nil
}

type rateLimitSetFlags struct {
	rateTargetFlags
	per string
}

func (f *rateLimitSetFlags) define(fs *flag.FlagSet) {
	f.rateTargetFlags.define(fs)
	fs.StringVar(&f.per, "per-minute", "", "calls a minute, or unlimited (-1 is taken for unlimited)")
}

// perMinute is --per-minute: nil for unlimited (tenancy.ParseLimit). Its
// range is tenancy's, refused by SetRateLimit naming the flag.
func (f *rateLimitSetFlags) perMinute() (*int, error) {
	if f.per == "" {
		return nil, usagef("--per-minute is required: calls a minute, or unlimited")
	}
	n, ok := tenancy.ParseLimit(f.per)
	if !ok {
		return nil, usagef("--per-minute must be a whole number of calls a minute, or unlimited (got %q)", f.per)
	}
	if n == nil {
		return nil, nil
	}
	v := int(*n)
	return &v, nil
}

func runRateLimitSet(e *env, f *rateLimitSetFlags) error {
	orgID, l, err := f.target()
	if err != nil {
		return err
	}
	if l.PerMinute, err = f.perMinute(); err != nil {
		return err
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

func runRateLimitClear(e *env, f *rateTargetFlags) error {
	orgID, l, err := f.target()
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

func runRateLimitShow(e *env, f *orgFlags) error {
	orgID, err := f.orgID()
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
