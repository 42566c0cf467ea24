package knowledge_test

import (
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// A history, written into the rows' timestamps: a was stored 10 h ago and
// superseded by b 5 h ago; e was stored 10 h ago and expired 6 h ago; c was
// stored 1 h ago; f was stored 10 h ago and forgotten. asOf answers what
// the org knew then, in search (every list) and in list_knowledge.
func TestAsOf(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := time.Now()
	h := func(n int) time.Time { return now.Add(-time.Duration(n) * time.Hour) }
	a := b.store(t, b.alice, "zebra migration v1", "zebra herds cross the river in July")
	bb := b.store(t, b.alice, "zebra migration v2", "zebra herds cross the river in August")
	c := b.store(t, b.alice, "zebra stripes", "zebra stripes deter flies")
	e := b.store(t, b.alice, "zebra census", "zebra count for this season")
	f := b.store(t, b.alice, "zebra secret", "zebra reserve gate code")
	if _, err := b.svc.Supersede(b.ctx, b.alice, a, bb); err != nil {
		t.Fatal(err)
	}
	for _, u := range []struct {
		sql  string
		args []any
	}{
		{"UPDATE knowledge SET created_at = $2 WHERE id = $1", []any{a, h(10)}},
		{"UPDATE knowledge SET created_at = $2, superseded_at = $3 WHERE id = $1", []any{a, h(10), h(5)}},
		{"UPDATE knowledge SET created_at = $2 WHERE id = $1", []any{bb, h(5)}},
		{"UPDATE knowledge SET created_at = $2 WHERE id = $1", []any{c, h(1)}},
		{"UPDATE knowledge SET created_at = $2, expires_at = $3 WHERE id = $1", []any{e, h(10), h(6)}},
		{"UPDATE knowledge SET created_at = $2 WHERE id = $1", []any{f, h(10)}},
	} {
		if _, err := b.pool.Exec(b.ctx, u.sql, u.args...); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.svc.Forget(b.ctx, b.alice, f, "secret", false); err != nil {
		t.Fatal(err)
	}
	b.embedPending(t)
	b.indexAll(t)

	cases := []struct {
		name                string
		asOf                *time.Time
		superseded, expired bool
		want                []uuid.UUID
	}{
		{"today", nil, false, false, []uuid.UUID{bb, c}},
		{"7 h ago: a is the head, e not yet expired", ptr(h(7)), false, false, []uuid.UUID{a, e}},
		{"4 h ago: b replaced a, e expired", ptr(h(4)), false, false, []uuid.UUID{bb}},
		{"4 h ago, with superseded", ptr(h(4)), true, false, []uuid.UUID{a, bb}},
		{"4 h ago, with expired", ptr(h(4)), false, true, []uuid.UUID{bb, e}},
		{"11 h ago: nothing yet", ptr(h(11)), true, true, nil},
	}
	for _, tc := range cases {
		res, err := b.svc.Search(b.ctx, b.alice, knowledge.SearchInput{Query: "zebra", MinScore: ptr(0.0),
			IncludeSuperseded: tc.superseded, IncludeExpired: tc.expired, AsOf: tc.asOf})
		if err != nil {
			t.Fatal(err)
		}
		var got []uuid.UUID
		for _, hit := range res.Hits {
			got = append(got, hit.ID)
			if hit.Signals.Cosine == nil || hit.Signals.BM25 == nil {
				t.Errorf("%s: %s not found by both the vector and the full-text list: %+v", tc.name, hit.Title, hit.Signals)
			}
		}
		sortIDs(got)
		sortIDs(tc.want)
		if !slices.Equal(got, tc.want) {
			t.Errorf("search %s: %v, want %v", tc.name, got, tc.want)
		}
		page, err := b.svc.List(b.ctx, b.alice, knowledge.ListInput{IncludeSuperseded: tc.superseded, IncludeExpired: tc.expired, AsOf: tc.asOf})
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, hit := range page.Hits {
			got = append(got, hit.ID)
		}
		sortIDs(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("list %s: %v, want %v", tc.name, got, tc.want)
		}
	}
	// Paging under asOf stays within it.
	p1, err := b.svc.List(b.ctx, b.alice, knowledge.ListInput{AsOf: ptr(h(7)), Limit: new(1)})
	if err != nil || len(p1.Hits) != 1 || p1.NextCursor == "" {
		t.Fatalf("page 1: %+v %v", p1, err)
	}
	p2, err := b.svc.List(b.ctx, b.alice, knowledge.ListInput{AsOf: ptr(h(7)), Limit: new(1), Cursor: p1.NextCursor})
	if err != nil || len(p2.Hits) != 1 || p2.NextCursor != "" || p2.Hits[0].ID == p1.Hits[0].ID {
		t.Fatalf("page 2: %+v %v", p2, err)
	}

	future := now.Add(time.Hour)
	_, err = b.svc.Search(b.ctx, b.alice, knowledge.SearchInput{Query: "zebra", AsOf: &future})
	wantCode(t, err, errs.CodeInvalidArgument, "asOf")
	_, err = b.svc.List(b.ctx, b.alice, knowledge.ListInput{AsOf: &future})
	wantCode(t, err, errs.CodeInvalidArgument, "asOf")
}

func sortIDs(ids []uuid.UUID) {
	slices.SortFunc(ids, func(x, y uuid.UUID) int { return slices.Compare(x[:], y[:]) })
}
