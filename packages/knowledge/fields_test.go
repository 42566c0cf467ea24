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
