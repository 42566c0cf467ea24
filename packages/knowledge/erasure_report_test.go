package knowledge_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/erasure"
)

// The erasure report (ctl erasure-report) finds an entry where it is
// stored (its row, its index postings and terms, the counters of its tag,
// the store's Redis record) by its id, title, body and own words, and
// nothing once it is forgotten or purged (the tombstone keeps its id, by
// design: Kept); a text is found in the org's rows only; an id of another
// org is scanned for like a missing one; the scan stops at its deadline
// saying so.
func TestErasureReportFindsCopiesAndProvesErasure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	org, other := b.mkOrg(t, "acme"), b.mkOrg(t, "other")
	alice := knowledge.Caller{OrgID: org, AgentID: b.mkAgent(t, org, "alice")}
	eve := knowledge.Caller{OrgID: other, AgentID: b.mkAgent(t, other, "eve")}
	store := func(c knowledge.Caller, title, body string, tags ...string) uuid.UUID {
		t.Helper()
		tok := uuid.New()
		r, err := b.svc.Store(b.ctx, c, knowledge.StoreInput{Title: title, Body: body, Tags: tags, ClientToken: &tok})
		if err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	forgotten := store(alice, "Vault rotation runbook", "Rotate the quxvault7781 credentials on the harbour cluster before the audit; the ledger keeps the old ones for a day.", "quxvault-keys")
	purged := store(alice, "Ferry schedule note", "The zebrine9913 ferry leaves the harbour at dawn; the ledger lists its crew.")
	store(alice, "Harbour ledger", "The harbour ledger lists the crews and the cluster audit dates.")
	theirs := store(eve, "Their copy", "They also wrote quxvault7781 down, in their own org.")
	b.indexAll(t)
	if _, err := b.svc.Search(b.ctx, alice, knowledge.SearchInput{Query: "harbour ledger"}); err != nil {
		t.Fatal(err)
	}

	report := func(in knowledge.ErasureReportInput) *knowledge.ErasureReport {
		t.Helper()
		rep, err := b.ops.Operations().ErasureReport(b.ctx, org, in)
		if err != nil {
			t.Fatal(err)
		}
		if !rep.Complete || rep.Tables < 20 || rep.RedisKeys == 0 || rep.ElapsedMs < 0 {
			t.Fatalf("incomplete scan: %d tables, %d columns, %d Redis keys, not scanned %v", rep.Tables, rep.Columns, rep.RedisKeys, rep.NotScanned)
		}
		return rep
	}
	has := func(ts []knowledge.ErasureTrace, table, column, kind string) bool {
		for _, c := range ts {
			if c.Table == table && (column == "" || c.Column == column) && slices.Contains(c.Found, kind) {
				return true
			}
		}
		return false
	}
	inRedis := func(ts []knowledge.ErasureTrace, prefix, kind string) bool {
		for _, c := range ts {
			if strings.HasPrefix(c.RedisKey, prefix) && slices.Contains(c.Found, kind) {
				return true
			}
		}
		return false
	}

	// Stored: found everywhere it is.
	rep := report(knowledge.ErasureReportInput{Entry: forgotten})
	kinds := map[string]int{}
	for _, n := range rep.Needles {
		kinds[n.Kind]++
	}
	if !rep.EntryStored || kinds["id"] != 1 || kinds["title"] != 1 || kinds["body"] == 0 || kinds["word"] == 0 {
		t.Fatalf("needles of a stored entry: %+v", rep.Needles)
	}
	for _, n := range rep.Needles {
		if n.Kind == "word" && (n.Text == "harbour" || n.Text == "cluster" || n.Text == "ledger") {
			t.Errorf("word %q is held by another entry too, yet scanned for as the entry's own", n.Text)
		}
	}
	for _, want := range []struct{ table, column, kind string }{
		{"knowledge", "id", "id"}, {"knowledge", "title", "title"}, {"knowledge", "body", "body"},
		{"knowledge", "tags", "word"}, {"knowledge_postings", "entry_id", "id"}, {"knowledge_term_stats", "term", "word"},
		{"knowledge_count_deltas", "key", "word"},
	} {
		if !has(rep.Copies, want.table, want.column, want.kind) {
			t.Errorf("no copy of its %s found in %s.%s: %+v", want.kind, want.table, want.column, rep.Copies)
		}
	}
	if !inRedis(rep.Copies, "idem:k.store:"+org.String(), "title") {
		t.Errorf("the store's Redis record (its title) not found: %+v", rep.Copies)
	}
	// A text: in the org's rows only (the other org's copy is not this
	// org's to erase).
	text := report(knowledge.ErasureReportInput{Text: "QUXVAULT7781"})
	if !has(text.Copies, "knowledge", "body", "text") {
		t.Fatalf("text not found in the body: %+v", text.Copies)
	}
	for _, c := range text.Copies {
		if strings.Contains(c.Row, theirs.String()) || strings.Contains(c.Row, other.String()) {
			t.Errorf("another org's row reported: %+v", c)
		}
	}

	// Forgotten: no copy, once the worker's fold has taken the tag's
	// counter; before it the counter is found (the report says what is
	// left, not what will be).
	if _, err := b.svc.Forget(b.ctx, alice, forgotten, "erasure request", false); err != nil {
		t.Fatal(err)
	}
	if pending := report(knowledge.ErasureReportInput{Text: "quxvault-keys"}); !has(pending.Copies, "knowledge_count_deltas", "key", "text") {
		t.Errorf("before the fold, the tag's counter deltas are copies: %+v", pending.Copies)
	}
	if _, err := maint(b.ops).CompactCounts(b.ctx, 0); err != nil {
		t.Fatal(err)
	}
	after := report(knowledge.ErasureReportInput{Entry: forgotten})
	if after.EntryStored || len(after.Needles) != 1 || !after.Clean() {
		t.Fatalf("after forget: stored %v, needles %+v, copies %+v", after.EntryStored, after.Needles, after.Copies)
	}
	if !has(after.Kept, "knowledge_tombstones", "id", "id") || after.Kept[0].Kept == "" {
		t.Fatalf("the tombstone keeps the id, by design, and says so: %+v", after.Kept)
	}
	for _, needle := range rep.Needles {
		if needle.Kind == "id" {
			continue
		}
		if r := report(knowledge.ErasureReportInput{Text: needle.Text}); !r.Clean() {
			t.Errorf("after forget, its %s %q is left in %+v", needle.Kind, needle.Text, r.Copies)
		}
	}

	// Purged: no copy and no tombstone.
	before := report(knowledge.ErasureReportInput{Entry: purged})
	if len(before.Copies) == 0 {
		t.Fatal("the entry to purge is found nowhere")
	}
	if _, err := b.ops.Operations().Purge(b.ctx, org, knowledge.PurgeScope{Entry: purged}, false); err != nil {
		t.Fatal(err)
	}
	if r := report(knowledge.ErasureReportInput{Entry: purged}); !r.Clean() || len(r.Kept) != 0 {
		t.Fatalf("after purge: copies %+v, kept %+v", r.Copies, r.Kept)
	}
	if r := report(knowledge.ErasureReportInput{Text: "zebrine9913"}); !r.Clean() {
		t.Fatalf("after purge, its word is left in %+v", r.Copies)
	}

	// Another org's entry: scanned for like a missing id.
	foreign, missing := report(knowledge.ErasureReportInput{Entry: theirs}), report(knowledge.ErasureReportInput{Entry: uuid.New()})
	if foreign.EntryStored || len(foreign.Needles) != 1 || !foreign.Clean() || len(foreign.Kept) != 0 ||
		missing.EntryStored || len(missing.Needles) != 1 || !missing.Clean() {
		t.Fatalf("another org's id %+v, a missing id %+v", foreign, missing)
	}

	// Every key the product made in Redis is under a pattern the report
	// scans (the store's records, the query vectors).
	var patterns []string
	for _, o := range []uuid.UUID{org, other} {
		patterns = append(patterns, erasure.RedisPatterns(o)...)
	}
	keys, err := b.redis.Client.Keys(b.ctx, "*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("Redis keys: %v %v", keys, err)
	}
	for _, k := range keys {
		if !slices.ContainsFunc(patterns, func(p string) bool { return strings.HasPrefix(k, strings.TrimSuffix(p, "*")) }) {
			t.Errorf("Redis key %s is under no pattern the erasure report scans (%v)", k, patterns)
		}
	}
}

// Cut short by its deadline, a report answers what it scanned and names
// what it did not; bad input is refused naming the field.
func TestErasureReportDeadlineAndInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rep, err := b.ops.Operations().ErasureReport(b.ctx, b.org, knowledge.ErasureReportInput{Text: "anything", Timeout: 1})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Complete || rep.Clean() || len(rep.NotScanned) == 0 || !strings.Contains(strings.Join(rep.NotScanned, "; "), "deadline") {
		t.Fatalf("a scan cut short: complete %v, not scanned %v", rep.Complete, rep.NotScanned)
	}
	// The caller's own cancellation is an error, not a report.
	ctx, cancel := context.WithCancel(b.ctx)
	cancel()
	if _, err := b.ops.Operations().ErasureReport(ctx, b.org, knowledge.ErasureReportInput{Text: "anything"}); err == nil {
		t.Fatal("a cancelled report answered")
	}
	for _, in := range []knowledge.ErasureReportInput{
		{}, {Text: "abc"}, {Text: "   abc  "}, {Text: "text", Entry: uuid.New()}, {Text: strings.Repeat("x", knowledge.MaxErasureTextChars+1)},
		{Text: "a\x00bcd"}, {Text: "valid", Timeout: -1},
	} {
		_, err := b.ops.Operations().ErasureReport(b.ctx, b.org, in)
		if !errors.Is(err, errs.ErrInvalidArgument) {
			t.Errorf("%+v: %v, want invalid_argument", in, err)
		}
	}
}
