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

// timeFlag parses --since/--until: an RFC 3339 time (2026-11-24T10:00:00Z),
// a date (2026-11-24, midnight UTC), or a duration before now (90m, 24h).
func timeFlag(name, v string, now time.Time) (*time.Time, error) {
	if v == "" {
		return nil, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return &t, nil
	}
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return &t, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		t := now.Add(-d)
		return &t, nil
	}
	return nil, usagef("--%s: %q is not a time (2026-11-24T10:00:00Z or 2026-11-24) nor a positive duration before now (24h)", name, v)
}

type auditFlags struct {
	orgFlags
	agent, entry, tool, since, until string
	limit                            int
}

func (f *auditFlags) define(fs *flag.FlagSet) {
	f.orgFlags.define(fs)
	fs.StringVar(&f.agent, "agent", "", "only this agent's calls (agent id)")
	fs.StringVar(&f.entry, "entry", "", "only calls that touched this entry (entry id)")
	fs.StringVar(&f.tool, "tool", "", "only this tool (store_knowledge, ...) or resource kind (knowledge_entry, task_knowledge, org_stats)")
	fs.StringVar(&f.since, "since", "", "from this time on: RFC 3339, a date, or a duration before now (24h)")
	fs.StringVar(&f.until, "until", "", "before this time: RFC 3339, a date, or a duration before now")
	fs.IntVar(&f.limit, "limit", 100, fmt.Sprintf("at most this many records (1..%d)", tenancy.MaxAuditLimit))
}

// filter is the flags as a tenancy.AuditFilter, times relative to now.
func (f *auditFlags) filter(now time.Time) (tenancy.AuditFilter, error) {
	af := tenancy.AuditFilter{Name: f.tool, Limit: f.limit}
	for _, opt := range []struct {
		name, v string
		dst     **uuid.UUID
	}{{"agent", f.agent, &af.AgentID}, {"entry", f.entry, &af.EntryID}} {
		if opt.v == "" {
			continue
		}
		id, err := uuidFlag(opt.name, opt.v)
		if err != nil {
			return af, err
		}
		*opt.dst = &id
	}
	var err error
	if af.Since, err = timeFlag("since", f.since, now); err != nil {
		return af, err
	}
	if af.Until, err = timeFlag("until", f.until, now); err != nil {
		return af, err
	}
	// The filter's rules are tenancy's; a filter they refuse is a wrong
	// command line.
	if err := af.Validate(); err != nil {
		return af, &usageError{err}
	}
	return af, nil
}

func runAudit(e *env, f *auditFlags) error {
	orgID, err := f.orgID()
	if err != nil {
		return err
	}
	af, err := f.filter(time.Now())
	if err != nil {
		return err
	}
	t, err := e.tenancy()
	if err != nil {
		return err
	}
	events, err := t.Audit(e.ctx, orgID, af)
	if err != nil {
		return err
	}
	return e.print(map[string]any{"events": events}, func(w io.Writer) { printAudit(w, events) })
}

func printAudit(w io.Writer, events []tenancy.AuditEvent) {
	if len(events) == 0 {
		fmt.Fprintln(w, "no records")
	}
	for _, ev := range events {
		agent, token := "-", "-"
		if ev.AgentID != nil {
			agent = ev.AgentID.String()
		}
		if ev.TokenID != nil {
			token = ev.TokenID.String()
		}
		fmt.Fprintf(w, "%s  %-8s %-20s %-16s %8.1f ms  agent %s  token %s",
			ev.At.UTC().Format("2006-01-02T15:04:05.000Z"), ev.Kind, ev.Name, ev.Outcome, float64(ev.DurationUs)/1000, agent, token)
		if ev.QueryLength != nil {
			fmt.Fprintf(w, "  query %d chars #%x", *ev.QueryLength, []byte(ev.QueryHash))
		}
		if len(ev.EntryIDs) > 0 {
			ids := make([]string, len(ev.EntryIDs))
			for i, id := range ev.EntryIDs {
				ids[i] = id.String()
			}
			fmt.Fprintf(w, "  entries %s", strings.Join(ids, ","))
		}
		fmt.Fprintln(w)
	}
}

// The retention as the operator runs it (docs/operators.md, "Days and
// retention"): the worker drops the days past AUDIT_RETENTION on its own;
// this is for a deployment that runs the retention from its scheduler, or
// wants a shorter one at once.

type auditPruneFlags struct{ olderThan string }

func (f *auditPruneFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&f.olderThan, "older-than", "90d", "the retention: days (90d) or a Go duration (2160h), at least 1h")
}

func runAuditPrune(e *env, f *auditPruneFlags) error {
	d, err := retentionFlag(f.olderThan)
	if err != nil {
		return err
	}
	t, err := e.tenancy()
	if err != nil {
		return err
	}
	cutoff := time.Now().Add(-d)
	n, err := t.PruneAudit(e.ctx, cutoff)
	if err != nil {
		return err
	}
	return e.print(map[string]any{"dropped": n, "before": cutoff.UTC()}, func(w io.Writer) {
		fmt.Fprintf(w, "dropped %d records: the days that ended before %s\n", n, cutoff.UTC().Format(time.RFC3339))
	})
}

// retentionFlag reads "90d" or a Go duration, at least an hour.
func retentionFlag(v string) (time.Duration, error) {
	var d time.Duration
	if n, ok := strings.CutSuffix(v, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil {
			return 0, usagef("--older-than: %q is not a number of days (90d) nor a duration (2160h)", v)
		}
		d = time.Duration(days) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			return 0, usagef("--older-than: %q is not a number of days (90d) nor a duration (2160h)", v)
		}
	}
	if d < time.Hour {
		return 0, usagef("--older-than: %q is less than 1h", v)
	}
	return d, nil
}
