package knowledge_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
)

// secretMark is in every secret word: what the scans look for.
const secretMark = "zqxsecret"

// Issue 24, item 1, every place of docs/operators.md's inventory scanned
// at once: entries carrying secret words (in the title, the body, a long
// body's passages and chunks, a tag, and the Redis record of a store with
// a clientToken, whose similar list names another secret entry) are
// forgotten by their author and purged with their agent by the operator,
// while other agents store, supersede and search (for the secret words
// too), the worker embeds and the indexer indexes, in each of three
// rounds (seeded). Afterwards, and once the worker's upkeep has folded the
// counters, no row of any table and no key or value of the org's Redis
// holds a secret word, the org's lexical index equals a rebuild from the
// rows left, and the quota counts the rows left.
func TestErasureLeavesNoTraceAnywhere(t *testing.T) {
	t.Parallel()
	const rounds = 3
	for round := range rounds {
		t.Run(fmt.Sprintf("round=%d", round), func(t *testing.T) {
			t.Parallel()
			erasureRace(t, round)
		})
	}
}

// erasureRace is one round of TestErasureLeavesNoTraceAnywhere, in a
// database and a Redis database of its own: the rounds run at once, beside
// the package's other tests, rather than one after another (a round waits
// on its erasures and its racing writers' commits more than on the CPU).
func erasureRace(t *testing.T, round int) {
	b := setup(t)
	h := jobs.NewEmbedHandler(b.pool, embed.NewLocal(), jobs.HandlerOptions{})
	rng := rand.New(rand.NewPCG(2424, uint64(round)))
	org := b.mkOrg(t, fmt.Sprintf("erasure-%d", round))
	alice := knowledge.Caller{OrgID: org, AgentID: b.mkAgent(t, org, "alice")}
	bob := knowledge.Caller{OrgID: org, AgentID: b.mkAgent(t, org, "bob")}
	carol := knowledge.Caller{OrgID: org, AgentID: b.mkAgent(t, org, "carol")}
	secretWord := func(i int) string { return fmt.Sprintf("%s%d%03dword", secretMark, round, i) }
	// 12 secret entries a round, half alice's (forgotten), half bob's
	// (purged with his agent); a third long; each a near-copy of the
	// previous one, so store answers list secret entries as similar.
	var alices []uuid.UUID
	for i := range 12 {
		c := alice
		if i%2 == 1 {
			c = bob
		}
		body := fmt.Sprintf("the incident runbook says %s and %s rotate the key", secretWord(i), secretWord(i/2*2))
		if i%3 == 0 {
			body += strings.Repeat(" harbour ledger "+secretWord(i)+" lantern quay", 200)
		}
		tok := uuid.New()
		r, err := b.svc.Store(b.ctx, c, knowledge.StoreInput{Title: "runbook " + secretWord(i), Body: body,
			Tags: []string{"tag-" + secretWord(i)}, ClientToken: &tok, Metadata: map[string]any{"case": secretWord(i), "round": round}})
		if err != nil {
			t.Fatal(err)
		}
		if c == alice {
			alices = append(alices, r.ID)
		}
	}

	ctx, cancel := context.WithCancel(b.ctx)
	var wg sync.WaitGroup
	fail := func(what string, err error) {
		if err == nil || ctx.Err() != nil {
			return
		}
		if retryable(err) { // "busy, retry": what a loaded machine may answer
			t.Logf("round %d: %s: %v (retryable)", round, what, err)
			return
		}
		t.Errorf("round %d: %s: %v", round, what, err)
	}
	wg.Add(2)
	go func() { // carol stores and supersedes her own entries
		defer wg.Done()
		r := rand.New(rand.NewPCG(2424, uint64(100+round)))
		var prev uuid.UUID
		for n := 0; ctx.Err() == nil; n++ {
			tok := uuid.New()
			res, err := b.svc.Store(ctx, carol, knowledge.StoreInput{Title: fmt.Sprintf("carol's note %d", n),
				Body: fmt.Sprintf("harbour ferry %d lantern quay %d", n, r.IntN(50)), ClientToken: &tok, Metadata: map[string]any{"round": round}})
			if err != nil {
				fail("store", err)
				return
			}
			if n%3 == 2 {
				_, err := b.svc.Supersede(ctx, carol, prev, res.ID)
				fail("supersede", err)
			}
			prev = res.ID
		}
	}()
	go func() { // searches, the secret words among them
		defer wg.Done()
		for n := 0; ctx.Err() == nil; n++ {
			q := "harbour lantern"
			if n%2 == 0 {
				q = secretWord(n % 12)
			}
			_, err := b.svc.Search(ctx, alice, knowledge.SearchInput{Query: q, Limit: new(10)})
			fail("search", err)
		}
	}()
	b.raceWorker(ctx, &wg, h, 16, nil, fail) // the worker: batches in job order, and the indexer

	time.Sleep(time.Duration(50+rng.IntN(100)) * time.Millisecond)
	for _, id := range alices {
		if err := withRetries(func() error {
			_, err := b.svc.Forget(b.ctx, alice, id, "erasure request", false)
			return err
		}); err != nil {
			t.Fatalf("round %d: forget: %v", round, err)
		}
	}
	if err := withRetries(func() error {
		_, err := b.ops.Operations().Purge(b.ctx, org, knowledge.PurgeScope{Agent: bob.AgentID}, false)
		return err
	}); err != nil {
		t.Fatalf("round %d: purge --agent: %v", round, err)
	}
	time.Sleep(time.Duration(rng.IntN(100)) * time.Millisecond)
	cancel()
	wg.Wait()

	// The worker's passes that follow: the queue indexed, the
	// counters folded (their keys are tags: content).
	b.drainIndex(t, org)
	if _, err := maint(b.ops).CompactCounts(b.ctx, 0); err != nil {
		t.Fatal(err)
	}
	for _, where := range b.tracesIn(t, org, secretMark) {
		t.Errorf("round %d: a secret word is left in %s", round, where)
	}
	// The metadata pairs hold hashes, not words: no pair is left of an
	// erased entry when the table is exactly the pairs of the rows left.
	b.wantLookupTablesTrue(t, fmt.Sprintf("round %d", round))
	after := b.indexState(t, org)
	if _, err := b.ops.Operations().SetTextSearchConfig(b.ctx, org, "english"); err != nil {
		t.Fatal(err)
	}
	b.indexAll(t)
	if rebuilt := b.indexState(t, org); !reflect.DeepEqual(after, rebuilt) {
		t.Fatalf("round %d: the index after the erasures (%d rows) differs from a rebuild (%d rows):\n%s", round, len(after), len(rebuilt), stateDiff(after, rebuilt))
	}
	left := b.count(t, "SELECT count(*) FROM knowledge WHERE org_id = $1", org)
	if used := b.quotaUsed(t, org); used != left {
		t.Fatalf("round %d: quota used %d for %d rows", round, used, left)
	}
}

// stateDiff lists the rows of one index state missing from the other
// (at most 20 of each).
func stateDiff(a, b []string) string {
	in := func(xs []string) map[string]bool {
		m := map[string]bool{}
		for _, x := range xs {
			m[x] = true
		}
		return m
	}
	ma, mb := in(a), in(b)
	var out []string
	for _, x := range a {
		if !mb[x] && len(out) < 20 {
			out = append(out, "only after:   "+x)
		}
	}
	n := len(out)
	for _, x := range b {
		if !ma[x] && len(out) < n+20 {
			out = append(out, "only rebuilt: "+x)
		}
	}
	return strings.Join(out, "\n")
}

// retryable says the call may succeed if made again (the product's
// "unavailable" under load).
func retryable(err error) bool {
	var ke *errs.Error
	return errors.As(err, &ke) && ke.Retryable
}

// withRetries makes a call as an agent or an operator does: again, after a
// pause, while it answers retryable (five times at most).
func withRetries(f func() error) error {
	var err error
	for attempt := range 5 {
		if err = f(); err == nil || !retryable(err) {
			return err
		}
		time.Sleep(time.Duration(100<<attempt) * time.Millisecond)
	}
	return err
}

// tracesIn lists where mark occurs in org's rows of every table and in
// the product's Redis keys, as ctl erasure-report finds them (the same
// scanner: Operations.ErasureReport); a scan that could not finish fails
// the test.
func (b *bundle) tracesIn(t *testing.T, org uuid.UUID, mark string) []string {
	t.Helper()
	rep, err := b.ops.Operations().ErasureReport(b.ctx, org, knowledge.ErasureReportInput{Text: mark})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Complete || rep.Tables < 20 || rep.RedisKeys == 0 {
		t.Fatalf("the scan did not cover everything: %d tables, %d Redis keys, not scanned: %v", rep.Tables, rep.RedisKeys, rep.NotScanned)
	}
	var out []string
	for _, c := range rep.Copies {
		out = append(out, traceString(c))
	}
	return out
}

// traceString names a trace's place.
func traceString(c knowledge.ErasureTrace) string {
	if c.RedisKey != "" {
		return fmt.Sprintf("redis key %s (%s, %v)", c.RedisKey, c.RedisType, c.Found)
	}
	return fmt.Sprintf("table %s.%s row %s (%v)", c.Table, c.Column, c.Row, c.Found)
}
