package search_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
)

// windowBag is a bag-of-words model that, like a small real one, reads only
// the first 256 words of a text: 384 dimensions, each word hashed to two
// coordinates. What it cannot see of a long text, only chunks make it see.
type windowBag struct{}

func (windowBag) Model() string   { return "window-bag-384" }
func (windowBag) Dimensions() int { return 384 }
func (windowBag) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		words := strings.FieldsFunc(strings.ToLower(t), func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
		})
		v := make([]float64, 384)
		for _, w := range words[:min(256, len(words))] {
			h := fnv.New32a()
			h.Write([]byte(w))
			v[h.Sum32()%384] += 1
			v[(h.Sum32()>>9)%384] += 0.5
		}
		var n float64
		for _, x := range v {
			n += x * x
		}
		out[i] = make([]float32, 384)
		for j, x := range v {
			out[i][j] = float32(x / math.Sqrt(n+1e-9))
		}
	}
	return out, nil
}

// windowBagCalibration: unrelated texts share no word (cosine ~0, a hash
// collision now and then), a close paraphrase shares most of them.
var windowBagCalibration = knowledge.VectorCalibration{Floor: 0.1, Full: 0.6}

// embedWith plays the embeddings worker with emb and 1,000-character chunks.
func (b *bundle) embedWith(t *testing.T, emb windowBag, ids ...uuid.UUID) {
	t.Helper()
	h := jobs.NewEmbedHandler(b.pool, emb, jobs.HandlerOptions{Chunk: knowledge.ChunkOptions{Chars: 1000, Overlap: 125}})
	var js []knowledge.EmbeddingJob
	for _, id := range ids {
		js = append(js, knowledge.EmbeddingJob{OrgID: b.org, EntryID: id, Generation: 1})
	}
	if err := h.Process(b.ctx, js); err != nil {
		t.Fatal(err)
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge WHERE org_id = $1 AND embedding_status <> 'ready'", b.org); n != 0 {
		t.Fatalf("%d entries not embedded", n)
	}
}

// longReport is a report of about 29,000 characters on many subjects,
// none of the query's words in it but in its last paragraph.
func longReport() string {
	subjects := []string{"quarterly", "capacity", "latency", "billing", "onboarding", "storage", "network", "hiring",
		"security", "compliance", "pricing", "support", "roadmap", "tooling", "observability", "incidents"}
	var sb strings.Builder
	for i := 0; sb.Len() < 28900; i++ {
		s := subjects[i%len(subjects)]
		fmt.Fprintf(&sb, "Section %d reviews %s work: the %s team closed %d items, opened %d more, and plans a %s review next cycle with clear owners and dates. ",
			i, s, s, 10+i%17, 3+i%5, subjects[(i*7)%len(subjects)])
		if i%4 == 3 {
			sb.WriteString("\n\n")
		}
	}
	sb.WriteString("\n\nFinally: the zebra migration script must run before the llama backfill.")
	return sb.String()
}

// The right answer ranked first: a long report holding every query word in
// its last paragraph, among twenty short notes holding two common ones. The
// report's evidence is its best passage's in the full-text list, and the
// strongest list leads the fusion: twenty weak matches in two lists do not
// bury it (issue 23: it ranked 21st of 21).
func TestSearchLongEntryFoundByItsBestPassage(t *testing.T) {
	t.Parallel()
	cal := windowBagCalibration
	emb := windowBag{}
	b := setup(t, func(o *knowledge.Options) { o.Embedder = emb; o.VectorCalibration = &cal })
	report := longReport()
	if n := len(report); n < 28000 || n > knowledge.MaxBodyChars {
		t.Fatalf("report of %d characters", n)
	}
	ids := []uuid.UUID{b.store(t, b.alice, "Platform status report", report)}
	for i := range 20 {
		ids = append(ids, b.store(t, b.alice, fmt.Sprintf("Routine entry %d", i),
			fmt.Sprintf("routine entry %d: the migration of table t%d and its backfill", i, i)))
	}
	b.embedWith(t, emb, ids...)
	for _, indexed := range []bool{false, true} {
		if indexed {
			b.indexAll(t) // first scored in the queue's tail, then from the index
		}
		r := b.search(t, b.alice, knowledge.SearchInput{Query: "zebra migration llama backfill", Limit: new(50), MinScore: ptr(0.0)})
		if len(r.Hits) == 0 || r.Hits[0].ID != ids[0] {
			t.Fatalf("indexed %v: the report must rank first: %+v", indexed, r.Hits)
		}
		if !indexed {
			continue // no statistics yet: every word weighs the same
		}
		for _, h := range r.Hits[1:] {
			if h.Score >= knowledge.ScoreWeak || h.Score > r.Hits[0].Score/3 {
				t.Errorf("a note holding two common words scores %v (the report %v)", h.Score, r.Hits[0].Score)
			}
		}
	}
	// Its evidence is its last passage's: it holds the whole query.
	r := b.search(t, b.alice, knowledge.SearchInput{Query: "zebra migration llama backfill"})
	if len(r.Hits) == 0 || r.Hits[0].ID != ids[0] || r.Hits[0].Score < knowledge.ScoreStrong {
		t.Fatalf("the report must answer at or above ScoreStrong: %+v", r.Hits)
	}
}

// A fixture built to break plain RRF: many entries that the vector and
// full-text lists both find by the query's common words, and the answers,
// each found by one list alone with strong evidence. The fused ranking is
// never below the better of its own lists (nDCG@10), and plain RRF is.
func TestFusionNeverBelowItsBestList(t *testing.T) {
	t.Parallel()
	cal := windowBagCalibration
	emb := windowBag{}
	b := setup(t, func(o *knowledge.Options) { o.Embedder = emb; o.VectorCalibration = &cal })
	var ids []uuid.UUID
	relevant := map[uuid.UUID]bool{}
	// The answers: the query's rare words, in long texts the model
	// reads only the start of.
	for i := range 3 {
		filler := strings.Repeat(fmt.Sprintf("unrelated filler sentence number %d about other things. ", i), 60)
		id := b.store(t, b.alice, fmt.Sprintf("Appendix %d", i), filler+"The kestrel ingest pipeline replays the walrus journal after a crash.")
		ids = append(ids, id)
		relevant[id] = true
	}
	// The crowd: the query's common words, short, so the model sees them
	// (told apart by tags, which are not embedded: the fake model's hash
	// collisions would otherwise spread the crowd at random).
	for i := range 30 {
		ids = append(ids, b.store(t, b.alice, "Pipeline note", "the pipeline after crash replays", fmt.Sprintf("n%d", i)))
	}
	b.embedWith(t, emb, ids...)
	b.indexAll(t)
	q := knowledge.SearchInput{Query: "kestrel pipeline walrus journal replays after crash"}
	l, err := knowledge.SearchLists(b.ctx, b.svc, b.alice, q, 40)
	if err != nil {
		t.Fatal(err)
	}
	ndcg := func(hits []knowledge.ListHit) float64 {
		var dcg, ideal float64
		for i := range min(10, len(hits)) {
			if relevant[hits[i].ID] {
				dcg += 1 / math.Log2(float64(i+2))
			}
		}
		for i := range len(relevant) {
			ideal += 1 / math.Log2(float64(i+2))
		}
		return dcg / ideal
	}
	plain := plainRRF(l.Vector, l.FullText, l.Title)
	fused, best := ndcg(l.Fused), max(ndcg(l.Vector), ndcg(l.FullText), ndcg(l.Title))
	t.Logf("nDCG@10 fused %.3f, vector %.3f, full text %.3f, title %.3f, plain RRF %.3f",
		fused, ndcg(l.Vector), ndcg(l.FullText), ndcg(l.Title), ndcg(plain))
	if fused < best-0.005 {
		t.Errorf("fused %.3f below its best list %.3f", fused, best)
	}
	if ndcg(plain) >= best {
		t.Errorf("the fixture does not break plain RRF (%.3f against %.3f): it tests nothing", ndcg(plain), best)
	}
	r := b.search(t, b.alice, q)
	for i, h := range r.Hits {
		switch {
		case i < len(relevant) && (!relevant[h.ID] || h.Score < knowledge.ScoreStrong):
			t.Errorf("hit %d: %v scores %v, want an answer at or above ScoreStrong", i, h.ID, h.Score)
		case i >= len(relevant) && h.Score >= knowledge.ScoreWeak:
			t.Errorf("hit %d: a common-word match scores %v, at or above ScoreWeak", i, h.Score)
		}
	}
}

// plainRRF fuses lists by plain RRF (k = 60), ties by id.
func plainRRF(lists ...[]knowledge.ListHit) []knowledge.ListHit {
	score := map[uuid.UUID]float64{}
	for _, l := range lists {
		for i, h := range l {
			score[h.ID] += 1 / float64(knowledge.RRFK+i+1)
		}
	}
	out := make([]knowledge.ListHit, 0, len(score))
	for id, s := range score {
		out = append(out, knowledge.ListHit{ID: id, Score: s})
	}
	slices.SortFunc(out, func(a, b knowledge.ListHit) int {
		if a.Score != b.Score {
			if a.Score > b.Score {
				return -1
			}
			return 1
		}
		return strings.Compare(a.ID.String(), b.ID.String())
	})
	return out
}
