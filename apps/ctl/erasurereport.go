package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// Erasure report: the proof an operator gives for an erasure request. The
// scan is knowledge.Operations.ErasureReport (the one scanner the tests of
// forget and purge use too); this command reads its flags, opens the
// database and Redis, and prints where copies remain.

type erasureReportFlags struct {
	orgFlags
	text, entry string
	timeout     time.Duration
}

func (f *erasureReportFlags) define(fs *flag.FlagSet) {
	f.orgFlags.define(fs)
	fs.StringVar(&f.text, "text", "", "scan for this text (case-insensitive, at least 4 characters)")
	fs.StringVar(&f.entry, "entry", "", "scan for this entry: its id and, while it is stored, its title, body fragments and own words")
	fs.DurationVar(&f.timeout, "timeout", knowledge.DefaultErasureReportTimeout, "stop scanning after this long and say what was not scanned (at most 1h)")
}

// exitNotClean is erasure-report's exit code when the report is not the
// all-clear: a copy was found, or the scan was cut short.
const exitNotClean = 3

func runErasureReport(e *env, f *erasureReportFlags) error {
	orgID, err := f.orgID()
	if err != nil {
		return err
	}
	in := knowledge.ErasureReportInput{Text: f.text, Timeout: f.timeout}
	if f.entry != "" {
		if in.Entry, err = uuidFlag("entry", f.entry); err != nil {
			return err
		}
	}
	// The domain's rule, refused before connecting, worded as the flags.
	if (f.text == "") == (f.entry == "") {
		return usagef("give exactly one of --text and --entry")
	}
	if err := in.Validate(); err != nil {
		var ke *errs.Error
		if errors.As(err, &ke) && ke.Field != "" {
			return usagef("--%s: %s", ke.Field, ke.Message)
		}
		return usagef("%v", err)
	}
	t, err := e.tenancy()
	if err != nil {
		return err
	}
	if _, err := t.Quotas(e.ctx, orgID); err != nil { // the org must exist
		return err
	}
	rcfg, err := knowledge.ParseRedisURL(e.redisURL())
	if err != nil {
		return fmt.Errorf("REDIS_URL: %w", err)
	}
	rdb := rcfg.Client()
	defer rdb.Close()
	pool, err := e.db()
	if err != nil {
		return err
	}
	svc := knowledge.New(pool, knowledge.Options{Redis: rdb})
	rep, err := svc.Operations().ErasureReport(e.ctx, orgID, in)
	if err != nil {
		return err
	}
	if !rep.Clean() {
		e.exit = exitNotClean
	}
	return e.print(rep, func(w io.Writer) { printErasureReport(w, rep) })
}

func printErasureReport(w io.Writer, rep *knowledge.ErasureReport) {
	if rep.Entry != nil {
		fmt.Fprintf(w, "erasure report, org %s, entry %s: %s\n", rep.OrgID, rep.Entry, entryNeedles(rep))
	} else {
		fmt.Fprintf(w, "erasure report, org %s, text %q\n", rep.OrgID, rep.Text)
	}
	place := func(c knowledge.ErasureTrace) (string, string) {
		if c.RedisKey != "" {
			return "redis " + c.RedisKey, "(" + c.RedisType + ")"
		}
		return c.Table + "." + c.Column, c.Row
	}
	if len(rep.Copies) > 0 {
		fmt.Fprintf(w, "copies (%d):\n", len(rep.Copies))
		for _, c := range rep.Copies {
			p, row := place(c)
			fmt.Fprintf(w, "  %s  %s  found: %s\n", p, row, strings.Join(c.Found, ", "))
		}
	}
	if len(rep.MoreRows) > 0 {
		fmt.Fprintf(w, "more rows than the %d listed in: %s\n", knowledge.MaxErasureRows, strings.Join(rep.MoreRows, ", "))
	}
	if len(rep.Kept) > 0 {
		fmt.Fprintf(w, "kept by design (%d):\n", len(rep.Kept))
		for _, c := range rep.Kept {
			p, row := place(c)
			fmt.Fprintf(w, "  %s  %s  found: %s (%s)\n", p, row, strings.Join(c.Found, ", "), c.Kept)
		}
	}
	switch {
	case len(rep.Copies) == 0 && rep.Complete:
		fmt.Fprintln(w, "nothing found")
	case len(rep.Copies) == 0:
		fmt.Fprintln(w, "nothing found in what was scanned, but the scan is NOT complete")
	}
	for _, n := range rep.NotScanned {
		fmt.Fprintf(w, "not scanned: %s\n", n)
	}
	fmt.Fprintf(w, "scanned %d tables (%d columns) and %d Redis keys in %.2f s\n", rep.Tables, rep.Columns, rep.RedisKeys, rep.Elapsed.Seconds())
}

// entryNeedles says what an entry was scanned for.
func entryNeedles(rep *knowledge.ErasureReport) string {
	if !rep.EntryStored {
		return "not stored in the org (erased, never stored, or another org's): scanned for its id alone"
	}
	n := map[string]int{}
	for _, x := range rep.Needles {
		n[x.Kind]++
	}
	return fmt.Sprintf("stored: scanned for its id, title, %d body fragments and %d words no other entry holds", n["body"], n["word"])
}
