package entries_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/entries"
)

// store_knowledge lists the org's existing head entries that look like the
// new one: indexed entries and entries stored a moment ago alike, never
// another org's, never a superseded
// or the new entry itself, and nothing for a distinct entry on the same
// subject.
func TestStoreListsSimilarEntries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const body = "Autovacuum cannot remove dead tuples while an idle-in-transaction session holds an old snapshot; " +
		"find it in pg_stat_activity and set idle_in_transaction_session_timeout to end such sessions."
	orig := b.store(t, b.alice, "VACUUM stalls on long transactions", body)
	b.store(t, b.alice, "Redis eviction policy for the job queue", "Use noeviction for the asynq Redis so queued jobs are never evicted under memory pressure.")
	b.store(t, b.eve, "VACUUM stalls on long transactions", body) // another org: never listed
	old := b.store(t, b.alice, "VACUUM stalls on old transactions", body)
	newer := b.store(t, b.alice, "Unrelated newer entry", "says something else entirely about deploy pipelines")
	if _, err := b.svc.Supersede(b.ctx, b.alice, old, newer); err != nil {
		t.Fatal(err)
	}
	b.indexAll(t)

	check := func(name string, want int, title, body string) []domain.Similar {
		t.Helper()
		r, err := b.svc.Store(b.ctx, b.bob, domain.StoreInput{Title: title, Body: body})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Similar) != want {
			t.Fatalf("%s: similar %+v, want %d", name, r.Similar, want)
		}
		for _, s := range r.Similar {
			if s.ID == r.ID || s.ID == old || s.Score < entries.SimilarThreshold || s.Score > 1 {
				t.Fatalf("%s: listed %+v", name, s)
			}
		}
		return r.Similar
	}
	// A reworded copy: found through the index.
	got := check("reworded", 1, "Long transactions stall VACUUM",
		"An idle-in-transaction session holding an old snapshot stops autovacuum from removing dead tuples; "+
			"set idle_in_transaction_session_timeout and look in pg_stat_activity.")
	if got[0].ID != orig || got[0].Title != "VACUUM stalls on long transactions" {
		t.Fatalf("reworded: %+v", got)
	}
	// The copy just stored is not indexed yet: found by its keys, next to
	// the original.
	if got := check("again", 2, "VACUUM stalls on long transactions", body); got[0].Score != 1 {
		t.Fatalf("an exact copy scores %v", got[0].Score)
	}
	// Same subject, different knowledge: nothing.
	check("distinct", 0, "VACUUM freezes tuples to prevent wraparound",
		"Anti-wraparound autovacuum freezes old tuples; autovacuum_freeze_max_age sets when it starts, whatever the dead tuples.")
	check("unrelated", 0, "Go modules", "go mod tidy ignores go.work; add a replace directive")
}

func TestSimilarScore(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		min  float64
		max  float64
	}{
		{"the cat sat on the mat", "The cat sat on the mat.", 1, 1},
		{"The cat sat", "a dog ran", 0, 0},
		{"", "anything", 0, 0},
		{"Straße in München", "STRASSE in münchen", 0.3, 0.34}, // München matches, Straße does not
		{strings.Repeat("x ", 10) + "alpha beta", "alpha beta gamma", 0.66, 0.67},
	} {
		if got := entries.SimilarScore(tc.a, "", tc.b, ""); got < tc.min || got > tc.max {
			t.Errorf("%q vs %q: %v, want %v..%v", tc.a, tc.b, got, tc.min, tc.max)
		}
	}
}

// Entries without keys (stored before migration 00009, or imported) get
// the same keys from Upkeep as a store gives, and are then found by them.
func TestUpkeepBackfillsSimilarKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var ids []string
	for i := range 5 {
		ids = append(ids, b.store(t, b.alice, fmt.Sprintf("common words entry %d", i), "service config error timeout retry queue worker").String())
	}
	stored := b.count(t, "SELECT count(DISTINCT similar_keys) FROM knowledge WHERE org_id = $1", b.org)
	var want []int64
	if err := b.pool.QueryRow(b.ctx, "SELECT similar_keys FROM knowledge WHERE id = $1", ids[0]).Scan(&want); err != nil || len(want) != 16 {
		t.Fatalf("store wrote keys %v (%v)", want, err)
	}
	if _, err := b.pool.Exec(b.ctx, "UPDATE knowledge SET similar_keys = NULL"); err != nil {
		t.Fatal(err)
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge_similar_keys WHERE org_id = $1", b.org); n != 0 {
		t.Fatalf("the look-up's table holds %d entries' keys after they were cleared", n)
	}
	rep, err := b.maint().Upkeep(b.ctx)
	if err != nil || rep.SimilarKeys != 5 {
		t.Fatalf("upkeep: %+v %v", rep, err)
	}
	var got []int64
	if err := b.pool.QueryRow(b.ctx, "SELECT similar_keys FROM knowledge WHERE id = $1", ids[0]).Scan(&got); err != nil || !slices.Equal(got, want) {
		t.Fatalf("backfilled keys %v, stored %v (%v)", got, want, err)
	}
	if n := b.count(t, "SELECT count(DISTINCT similar_keys) FROM knowledge WHERE org_id = $1", b.org); n != stored {
		t.Fatalf("%d distinct key sets after the backfill, %d before", n, stored)
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge_similar_keys s JOIN knowledge k ON k.id = s.entry_id AND k.org_id = s.org_id AND k.similar_keys = s.keys WHERE s.org_id = $1", b.org); n != 5 {
		t.Fatalf("the look-up's table holds the backfilled keys of %d entries, want 5", n)
	}
	if rep, err := b.maint().Upkeep(b.ctx); err != nil || rep.SimilarKeys != 0 {
		t.Fatalf("second upkeep: %+v %v", rep, err)
	}
	// Found again once the keys are back (the rare terms would find these
	// too; TestSimilarCandidatesEachWay takes each way alone).
	b.indexAll(t)
	r, err := b.svc.Store(b.ctx, b.bob, domain.StoreInput{Title: "common words entry 3", Body: "service config error timeout retry queue worker"})
	if err != nil || len(r.Similar) != 3 {
		t.Fatalf("store of a copy: %+v %v", r, err)
	}
}

// Chinese near-duplicates are listed: their text has no spaces, so the
// word sets compare character bigrams, as the index does; a distinct
// Chinese entry on another subject is not listed.
func TestStoreListsSimilarCJKEntries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	orig := b.store(t, b.alice, "数据库连接池耗尽", "当连接池达到最大连接数时，新的请求会一直等待，直到有连接被释放回连接池。请检查慢查询并调大连接池。")
	b.store(t, b.alice, "部署流水线失败", "构建镜像时磁盘空间不足，需要每晚清理旧的镜像层。")
	b.indexAll(t)
	r, err := b.svc.Store(b.ctx, b.bob, domain.StoreInput{
		Title: "数据库连接池耗尽了",
		Body:  "当连接池达到最大连接数时，新的请求会一直等待，直到有连接被释放回池中。请检查慢查询，并调大连接池。",
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Similar) != 1 || r.Similar[0].ID != orig || r.Similar[0].Score < entries.SimilarThreshold {
		t.Fatalf("want the original listed: %+v", r.Similar)
	}
}
