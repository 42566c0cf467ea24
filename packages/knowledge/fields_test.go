package knowledge_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// Every rule of the entry fields is a clear error naming the field (and,
// for metadata, the key at fault), and a refused store writes nothing.
func TestEntryFieldsValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	many := map[string]any{}
	for i := range knowledge.MaxMetadataKeys + 1 {
		many[fmt.Sprintf("k%d", i)] = i
	}
	big := map[string]any{}
	for i := range 8 {
		big[fmt.Sprintf("k%d", i)] = strings.Repeat("x", 600) // 8 * ~607 bytes > 4096
	}
	cases := []struct {
		name  string
		in    knowledge.StoreInput
		field string
		rule  string
	}{
		{"source too long", knowledge.StoreInput{Source: strings.Repeat("é", knowledge.MaxSourceChars+1)}, "source", "at most 1000 characters"},
		{"source blank", knowledge.StoreInput{Source: "  "}, "source", "blank"},
		{"source NUL", knowledge.StoreInput{Source: "a\x00"}, "source", "NUL"},
		{"kind unknown", knowledge.StoreInput{Kind: "factual"}, "kind", "semantic, episodic, procedural, reference"},
		{"too many keys", knowledge.StoreInput{Metadata: many}, "metadata", "at most 32 keys"},
		{"key upper case", knowledge.StoreInput{Metadata: map[string]any{"Env": "prod"}}, "metadata.Env", "lower snake case"},
		{"key starts with digit", knowledge.StoreInput{Metadata: map[string]any{"1env": "prod"}}, "metadata.1env", "lower snake case"},
		{"key with dash", knowledge.StoreInput{Metadata: map[string]any{"the-env": "prod"}}, "metadata.the-env", "lower snake case"},
		{"key too long", knowledge.StoreInput{Metadata: map[string]any{strings.Repeat("k", 65): 1}}, "metadata." + strings.Repeat("k", 64), "at most 64 characters"},
		{"null value", knowledge.StoreInput{Metadata: map[string]any{"env": nil}}, "metadata.env", "not null"},
		{"array value", knowledge.StoreInput{Metadata: map[string]any{"env": []any{"a"}}}, "metadata.env", "not an array"},
		{"object value", knowledge.StoreInput{Metadata: map[string]any{"env": map[string]any{"a": 1}}}, "metadata.env", "not an object"},
		{"NaN value", knowledge.StoreInput{Metadata: map[string]any{"ratio": math.NaN()}}, "metadata.ratio", "finite"},
		{"too big", knowledge.StoreInput{Metadata: big}, "metadata", "at most 4096 bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			in.Title, in.Body = "t", "b"
			_, err := b.svc.Store(b.ctx, b.alice, in)
			e := wantCode(t, err, errs.CodeInvalidArgument, tc.field)
			if !strings.Contains(e.Message, tc.rule) {
				t.Fatalf("error should state the rule %q: %q", tc.rule, e.Error())
			}
			// A correction names the replacement's field.
			_, err = b.svc.Correct(b.ctx, b.alice, uuid.New(), in)
			wantCode(t, err, errs.CodeInvalidArgument, "replacement."+tc.field)
		})
	}
	if n := b.entries(t); n != 0 {
		t.Fatalf("bad input wrote %d entries", n)
	}
}

// Store keeps source, kind and metadata; get, list and search answer them;
// a store without them gets the defaults; the origin says who made it.
func TestEntryFieldsRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t)
	meta := map[string]any{"env": "prod", "replicas": 3, "canary": true, "ratio": 0.25}
	r, err := b.svc.Store(b.ctx, b.alice, knowledge.StoreInput{
		Title: "Billing runbook", Body: "restart the billing workers in order",
		Source: "https://wiki.example.com/billing/runbook", Kind: knowledge.KindProcedural, Metadata: meta,
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Source != "https://wiki.example.com/billing/runbook" || r.Kind != knowledge.KindProcedural || len(r.Metadata) != 4 {
		t.Fatalf("store answer: %+v", r)
	}
	plain, err := b.svc.Store(b.ctx, b.alice, knowledge.StoreInput{Title: "Plain fact", Body: "billing is written in Go"})
	if err != nil {
		t.Fatal(err)
	}
	e, err := b.svc.Get(b.ctx, b.alice, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantMeta := `{"canary":true,"env":"prod","ratio":0.25,"replicas":3}`
	if e.Origin != knowledge.OriginAgent || e.Source != r.Source || e.Kind != knowledge.KindProcedural || jsonOf(t, e.Metadata) != wantMeta {
		t.Fatalf("get: origin %q source %q kind %q metadata %s", e.Origin, e.Source, e.Kind, jsonOf(t, e.Metadata))
	}
	p, err := b.svc.Get(b.ctx, b.alice, plain.ID)
	if err != nil {
		t.Fatal(err)
	}
	if p.Source != "" || p.Kind != knowledge.DefaultKind || p.Metadata != nil {
		t.Fatalf("defaults: source %q kind %q metadata %v", p.Source, p.Kind, p.Metadata)
	}
	// The JSON of an entry: origin always, source and metadata only when set.
	raw := jsonOf(t, p)
	if !strings.Contains(raw, `"origin":"agent"`) || !strings.Contains(raw, `"kind":"semantic"`) || strings.Contains(raw, `"source"`) || strings.Contains(raw, `"metadata"`) {
		t.Fatalf("entry JSON: %s", raw)
	}
	l, err := b.svc.List(b.ctx, b.alice, knowledge.ListInput{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Hits) != 2 || l.Hits[1].ID != r.ID || l.Hits[1].Kind != knowledge.KindProcedural || l.Hits[1].Source != r.Source ||
		jsonOf(t, l.Hits[1].Metadata) != wantMeta || l.Hits[0].Kind != knowledge.DefaultKind {
		t.Fatalf("list: %+v", l.Hits)
	}
	s, err := b.svc.Search(b.ctx, b.alice, knowledge.SearchInput{Query: "billing runbook"})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Hits) == 0 || s.Hits[0].ID != r.ID || s.Hits[0].Source != r.Source || s.Hits[0].Kind != knowledge.KindProcedural ||
		jsonOf(t, s.Hits[0].Metadata) != wantMeta {
		t.Fatalf("search: %+v", s.Hits)
	}
}

// A retry with the same client token and the same fields replays; other
// fields are other arguments.
func TestEntryFieldsReplay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tok := uuid.New()
	in := knowledge.StoreInput{Title: "t", Body: "b", ClientToken: &tok, Source: "ticket:OPS-1", Kind: knowledge.KindEpisodic,
		Metadata: map[string]any{"severity": 2, "service": "api"}}
	first, err := b.svc.Store(b.ctx, b.alice, in)
	if err != nil {
		t.Fatal(err)
	}
	again, err := b.svc.Store(b.ctx, b.alice, in)
	if err != nil || !again.Replayed || again.ID != first.ID || again.Kind != knowledge.KindEpisodic {
		t.Fatalf("replay: %+v %v", again, err)
	}
	for name, change := range map[string]func(*knowledge.StoreInput){
		"source":   func(in *knowledge.StoreInput) { in.Source = "ticket:OPS-2" },
		"kind":     func(in *knowledge.StoreInput) { in.Kind = knowledge.KindSemantic },
		"metadata": func(in *knowledge.StoreInput) { in.Metadata = map[string]any{"severity": 3, "service": "api"} },
	} {
		other := in
		change(&other)
		// Through the database, not Redis: the fields are compared there too.
		b.redis.Client.FlushDB(b.ctx)
		if _, err := b.svc.Store(b.ctx, b.alice, other); errs.CodeOf(err) != errs.CodeInvalidArgument {
			t.Fatalf("%s changed: want clientToken reused, got %v", name, err)
		}
	}
}

// filterCorpus stores entries of every combination the filter tests ask
// about, and returns their ids by name.
func filterCorpus(t *testing.T, b *bundle) map[string]uuid.UUID {
	t.Helper()
	ids := map[string]uuid.UUID{}
	for _, e := range []struct {
		name, source, kind string
		meta               map[string]any
	}{
		{"wiki-prod", "https://wiki.example.com/billing", knowledge.KindReference, map[string]any{"env": "prod", "team": "billing"}},
		{"wiki-stage", "https://wiki.example.com/billing/stage", knowledge.KindReference, map[string]any{"env": "staging", "team": "billing"}},
		{"ticket", "jira:OPS-17", knowledge.KindEpisodic, map[string]any{"env": "prod", "severity": 2}},
		{"runbook", "https://wiki.example.org/runbook", knowledge.KindProcedural, map[string]any{"env": "prod", "team": "sre", "paged": true}},
		{"plain", "", "", nil},
	} {
		r, err := b.svc.Store(b.ctx, b.alice, knowledge.StoreInput{
			Title: "billing outage notes " + e.name, Body: "the billing service failed over during the outage " + e.name,
			Source: e.source, Kind: e.kind, Metadata: e.meta,
		})
		if err != nil {
			t.Fatal(err)
		}
		ids[e.name] = r.ID
	}
	// Another org's entry with the same fields is never found.
	if _, err := b.svc.Store(b.ctx, b.eve, knowledge.StoreInput{Title: "billing outage notes eve", Body: "the billing service failed over during the outage",
		Source: "https://wiki.example.com/billing", Kind: knowledge.KindReference, Metadata: map[string]any{"env": "prod", "team": "billing"}}); err != nil {
		t.Fatal(err)
	}
	return ids
}

// The filters of list and search: kind, source exact and by prefix,
// metadata equality (every key given), combined by AND; each mode of
// search finds the same filtered set.
func TestEntryFieldsFilters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := filterCorpus(t, b)
	b.embedPending(t)
	cases := []struct {
		name string
		f    knowledge.Filters
		want []string
	}{
		{"kind", knowledge.Filters{Kind: knowledge.KindReference}, []string{"wiki-prod", "wiki-stage"}},
		{"kind default", knowledge.Filters{Kind: knowledge.KindSemantic}, []string{"plain"}},
		{"source exact", knowledge.Filters{Source: "https://wiki.example.com/billing"}, []string{"wiki-prod"}},
		{"source prefix", knowledge.Filters{SourcePrefix: "https://wiki.example.com/"}, []string{"wiki-prod", "wiki-stage"}},
		{"source prefix wider", knowledge.Filters{SourcePrefix: "https://wiki.example."}, []string{"wiki-prod", "wiki-stage", "runbook"}},
		{"metadata one key", knowledge.Filters{Metadata: map[string]any{"env": "prod"}}, []string{"wiki-prod", "ticket", "runbook"}},
		{"metadata two keys", knowledge.Filters{Metadata: map[string]any{"env": "prod", "team": "billing"}}, []string{"wiki-prod"}},
		{"metadata number", knowledge.Filters{Metadata: map[string]any{"severity": 2}}, []string{"ticket"}},
		{"metadata bool", knowledge.Filters{Metadata: map[string]any{"paged": true}}, []string{"runbook"}},
		{"metadata no match", knowledge.Filters{Metadata: map[string]any{"env": "dev"}}, nil},
		{"kind and metadata", knowledge.Filters{Kind: knowledge.KindEpisodic, Metadata: map[string]any{"env": "prod"}}, []string{"ticket"}},
		{"prefix and metadata", knowledge.Filters{SourcePrefix: "https://wiki.", Metadata: map[string]any{"team": "sre"}}, []string{"runbook"}},
		{"source and kind disagree", knowledge.Filters{Source: "jira:OPS-17", Kind: knowledge.KindReference}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := map[uuid.UUID]bool{}
			for _, n := range tc.want {
				want[ids[n]] = true
			}
			l, err := b.svc.List(b.ctx, b.alice, knowledge.ListInput{Filters: tc.f})
			if err != nil {
				t.Fatal(err)
			}
			got := map[uuid.UUID]bool{}
			for _, h := range l.Hits {
				got[h.ID] = true
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("list: got %v, want %v", got, want)
			}
			for _, mode := range knowledge.Modes {
				s, err := b.svc.Search(b.ctx, b.alice, knowledge.SearchInput{Query: "billing outage notes", Filters: tc.f, Mode: mode, MinScore: ptr(0.0)})
				if err != nil {
					t.Fatal(err)
				}
				got := map[uuid.UUID]bool{}
				for _, h := range s.Hits {
					got[h.ID] = true
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("search %s: got %v, want %v", mode, got, want)
				}
			}
		})
	}
	// The filters' rules are the fields' rules, naming the filter.
	for _, tc := range []struct {
		f     knowledge.Filters
		field string
	}{
		{knowledge.Filters{Kind: "rumour"}, "kind"},
		{knowledge.Filters{Source: strings.Repeat("s", knowledge.MaxSourceChars+1)}, "source"},
		{knowledge.Filters{SourcePrefix: "\x00"}, "sourcePrefix"},
		{knowledge.Filters{Source: "a", SourcePrefix: "a"}, "sourcePrefix"},
		{knowledge.Filters{Metadata: map[string]any{"Env": "prod"}}, "metadata.Env"},
		{knowledge.Filters{Metadata: map[string]any{"env": nil}}, "metadata.env"},
	} {
		_, err := b.svc.List(b.ctx, b.alice, knowledge.ListInput{Filters: tc.f})
		wantCode(t, err, errs.CodeInvalidArgument, tc.field)
		_, err = b.svc.Search(b.ctx, b.alice, knowledge.SearchInput{Query: "q", Filters: tc.f})
		wantCode(t, err, errs.CodeInvalidArgument, tc.field)
	}
}

// A listing's cursor is sealed with its filters: another filter refuses it.
func TestEntryFieldsListCursor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	filterCorpus(t, b)
	f := knowledge.Filters{Metadata: map[string]any{"env": "prod"}}
	first, err := b.svc.List(b.ctx, b.alice, knowledge.ListInput{Filters: f, Limit: ptr(2)})
	if err != nil || len(first.Hits) != 2 || first.NextCursor == "" {
		t.Fatalf("first page: %+v %v", first, err)
	}
	next, err := b.svc.List(b.ctx, b.alice, knowledge.ListInput{Filters: f, Limit: ptr(2), Cursor: first.NextCursor})
	if err != nil || len(next.Hits) != 1 || next.NextCursor != "" {
		t.Fatalf("second page: %+v %v", next, err)
	}
	_, err = b.svc.List(b.ctx, b.alice, knowledge.ListInput{Filters: knowledge.Filters{Metadata: map[string]any{"env": "staging"}}, Limit: ptr(2), Cursor: first.NextCursor})
	wantCode(t, err, errs.CodeInvalidArgument, "cursor")
}

// Each mode ranks by its own lists only: a lexical search's hits have no
// vector rank (and the query is not embedded), a semantic search's have
// only a vector rank; hybrid uses all three.
func TestSearchMode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	filterCorpus(t, b)
	b.embedPending(t)
	ranks := func(mode string) (vec, lex int) {
		s, err := b.svc.Search(b.ctx, b.alice, knowledge.SearchInput{Query: "billing outage notes", Mode: mode, MinScore: ptr(0.0)})
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Hits) == 0 {
			t.Fatalf("mode %q: no hits", mode)
		}
		for _, h := range s.Hits {
			if h.VectorRank > 0 {
				vec++
			}
			if h.FullTextRank > 0 || h.TitleRank > 0 {
				lex++
			}
		}
		if (mode == knowledge.ModeLexical) == s.VectorSearch {
			t.Fatalf("mode %q: vectorSearch %v", mode, s.VectorSearch)
		}
		return vec, lex
	}
	if vec, lex := ranks(knowledge.ModeLexical); vec != 0 || lex == 0 {
		t.Fatalf("lexical: %d hits with a vector rank, %d with a lexical one", vec, lex)
	}
	if vec, lex := ranks(knowledge.ModeSemantic); vec == 0 || lex != 0 {
		t.Fatalf("semantic: %d hits with a vector rank, %d with a lexical one", vec, lex)
	}
	for _, mode := range []string{"", knowledge.ModeHybrid} {
		if vec, lex := ranks(mode); vec == 0 || lex == 0 {
			t.Fatalf("hybrid %q: %d hits with a vector rank, %d with a lexical one", mode, vec, lex)
		}
	}
	_, err := b.svc.Search(b.ctx, b.alice, knowledge.SearchInput{Query: "q", Mode: "fuzzy"})
	wantCode(t, err, errs.CodeInvalidArgument, "mode")
}

// get by source: the newest live entry with exactly that source; a
// superseded one, a prefix, another org's: not found.
func TestGetBySource(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := filterCorpus(t, b)
	e, err := b.svc.GetBySource(b.ctx, b.alice, "jira:OPS-17")
	if err != nil || e.ID != ids["ticket"] || e.Body == "" {
		t.Fatalf("by source: %+v %v", e, err)
	}
	newer, err := b.svc.Store(b.ctx, b.bob, knowledge.StoreInput{Title: "OPS-17 again", Body: "it happened again", Source: "jira:OPS-17"})
	if err != nil {
		t.Fatal(err)
	}
	if e, err = b.svc.GetBySource(b.ctx, b.alice, "jira:OPS-17"); err != nil || e.ID != newer.ID {
		t.Fatalf("the newest: %+v %v", e, err)
	}
	fix, err := b.svc.Store(b.ctx, b.bob, knowledge.StoreInput{Title: "OPS-17 fixed", Body: "no source on this one"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.Supersede(b.ctx, b.bob, newer.ID, fix.ID); err != nil {
		t.Fatal(err)
	}
	if e, err = b.svc.GetBySource(b.ctx, b.alice, "jira:OPS-17"); err != nil || e.ID != ids["ticket"] {
		t.Fatalf("a superseded entry is not live: %+v %v", e, err)
	}
	for _, src := range []string{"jira:OPS", "https://wiki.example.org/runbook/x"} {
		_, err := b.svc.GetBySource(b.ctx, b.alice, src)
		wantCode(t, err, errs.CodeNotFound, "source")
	}
	// Eve's org has an entry with this source too; alice's is not hers.
	e, err = b.svc.GetBySource(b.ctx, b.eve, "https://wiki.example.com/billing")
	if err != nil || e.ID == ids["wiki-prod"] {
		t.Fatalf("eve's own: %+v %v", e, err)
	}
	_, err = b.svc.GetBySource(b.ctx, b.eve, "jira:OPS-17")
	wantCode(t, err, errs.CodeNotFound, "source")
	_, err = b.svc.GetBySource(b.ctx, b.alice, "")
	wantCode(t, err, errs.CodeInvalidArgument, "source")
}

// Entries a search adds by following relations are within its filters too.
func TestEntryFieldsFilterHops(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := filterCorpus(t, b)
	for _, to := range []string{"plain", "wiki-stage"} {
		if _, err := b.svc.Link(b.ctx, b.alice, knowledge.LinkInput{FromID: ids["ticket"], ToID: ids[to], Type: "RELATES_TO"}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := b.svc.Search(b.ctx, b.alice, knowledge.SearchInput{Query: "jira OPS-17 outage notes ticket", Hops: 1, MinScore: ptr(0.0),
		Filters: knowledge.Filters{Metadata: map[string]any{"env": "prod"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range s.Hits {
		if h.ID == ids["plain"] || h.ID == ids["wiki-stage"] {
			t.Fatalf("a related entry outside the filter was added: %+v", h)
		}
	}
	s, err = b.svc.Search(b.ctx, b.alice, knowledge.SearchInput{Query: "outage notes ticket", Hops: 1, MinScore: ptr(0.0),
		Filters: knowledge.Filters{SourcePrefix: "jira:"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Hits) != 1 || s.Hits[0].ID != ids["ticket"] {
		t.Fatalf("prefix jira: with hops: %+v", s.Hits)
	}
}
