package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
)

// fakeProvider is an OpenAI-compatible /v1/embeddings server whose model
// makes vectors of the given width: every word of a text adds to a few
// coordinates picked by its hash, so texts sharing words are near. It
// answers the request's "dimensions" like text-embedding-3 (refusing a
// width its model does not have) and waits latency before each answer.
func fakeProvider(t testing.TB, dims int, latency time.Duration) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model      string   `json:"model"`
			Input      []string `json:"input"`
			Dimensions int      `json:"dimensions"`
		}
		if r.URL.Path != "/v1/embeddings" || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
			return
		}
		if req.Dimensions != 0 && req.Dimensions != dims {
			http.Error(w, `{"error":{"message":"this model has `+itoa(dims)+` dimensions"}}`, http.StatusBadRequest)
			return
		}
		if latency > 0 {
			time.Sleep(latency)
		}
		type item struct {
			Object    string    `json:"object"`
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		out := struct {
			Object string `json:"object"`
			Data   []item `json:"data"`
			Model  string `json:"model"`
		}{Object: "list", Model: req.Model}
		for i, text := range req.Input {
			out.Data = append(out.Data, item{"embedding", i, hashVector(text, dims)})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func hashVector(text string, dims int) []float32 {
	v := make([]float64, dims)
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
	}) {
		h := fnv.New64a()
		h.Write([]byte(w))
		x := h.Sum64()
		for k := 0; k < 4; k++ {
			sign := 1.0
			if x>>(60+k)&1 == 1 {
				sign = -1
			}
			v[int((x>>(k*13))%uint64(dims))] += sign
		}
	}
	// A little dense noise, seeded by the text: real models' vectors are
	// dense, and PostgreSQL would compress sparse ones (storage figures).
	h := fnv.New64a()
	h.Write([]byte(text))
	rng := rand.New(rand.NewPCG(h.Sum64(), 1))
	for i := range v {
		v[i] += (rng.Float64() - 0.5) * 0.04
	}
	var n float64
	for _, x := range v {
		n += x * x
	}
	out := make([]float32, dims)
	n = math.Sqrt(n)
	for i, x := range v {
		if n > 0 {
			out[i] = float32(x / n)
		} else {
			out[i] = float32(1 / math.Sqrt(float64(dims)))
		}
	}
	return out
}

func openAIAt(t testing.TB, srv *httptest.Server, dims int) *embed.OpenAI {
	t.Helper()
	e, err := embed.NewOpenAI(embed.OpenAIConfig{BaseURL: srv.URL + "/v1", Model: "fake-" + itoa(dims), Dimensions: dims})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// Models of 384, 1024 and 1536 dimensions behind an OpenAI-compatible
// server: entries are stored, embedded by the worker and found by the
// vector list; the model's HNSW index is built at its width; the start
// check accepts the configuration and refuses another width.
func TestModelsOfAnyWidthStoreEmbedAndSearch(t *testing.T) {
	t.Parallel()
	for _, dims := range []int{384, 1024, 1536} {
		t.Run(itoa(dims), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := context.Background()
			emb := openAIAt(t, fakeProvider(t, dims, 0), dims)
			svc := knowledge.New(b.pool, knowledge.Options{Embedder: emb, Enqueuer: b.enq})
			caller := knowledge.Caller{OrgID: b.org, AgentID: b.agent}
			var target knowledge.EmbeddingJob
			var all []knowledge.EmbeddingJob
			for i, e := range [][2]string{
				{"postgres connection pool exhausted", "raise max_connections or use pgbouncer in transaction mode"},
				{"banana smoothie", "blend bananas with milk"},
				{"kubernetes pod eviction", "the node ran out of memory"},
			} {
				r, err := svc.Store(ctx, caller, knowledge.StoreInput{Title: e[0], Body: e[1]})
				if err != nil {
					t.Fatal(err)
				}
				j := knowledge.EmbeddingJob{OrgID: b.org, EntryID: r.ID, Generation: 1}
				if i == 0 {
					target = j
				}
				all = append(all, j)
			}
			b.worker(t, emb, nil)
			b.waitStatus(t, knowledge.EmbeddingReady, 15*time.Second, ids(all...)...)
			var width int
			if err := b.pool.QueryRow(ctx, "SELECT vector_dims(embedding) FROM knowledge WHERE id = $1", target.EntryID).Scan(&width); err != nil || width != dims {
				t.Fatalf("stored width %d (%v), want %d", width, err, dims)
			}

			// The vector list alone finds it first ("pool exhausted" is
			// not its title's whole text, and the lexical lists are not
			// asked for).
			lists, err := knowledge.SearchLists(ctx, svc, caller, knowledge.SearchInput{Query: "pgbouncer connection pool"}, 10)
			if err != nil {
				t.Fatal(err)
			}
			if !lists.VectorSearch || len(lists.Vector) == 0 || lists.Vector[0].ID != target.EntryID {
				t.Fatalf("vector list %+v", lists.Vector)
			}
			res, err := svc.Search(ctx, caller, knowledge.SearchInput{Query: "pgbouncer connection pool"})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Hits) == 0 || res.Hits[0].ID != target.EntryID || res.Hits[0].VectorRank != 1 {
				t.Fatalf("search %+v", res)
			}

			// The model's index, at its width, made at the worker's start
			// (EnsureVectorIndex; idempotent). A call returns without
			// building while another session holds the build lock (seen
			// about one run in five here): it is called again, as the
			// worker's next pass would.
			// Both of the space's indexes (entries, chunks) must be there
			// and valid before the second call, which must then build
			// nothing.
			var def string
			for try := 0; ; try++ {
				if _, err := knowledge.NewMaintenance(svc, knowledge.MaintenanceConfig{}).EnsureVectorIndex(ctx); err != nil {
					t.Fatal(err)
				}
				var valid int
				err := b.pool.QueryRow(ctx, `SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
					WHERE c.relname IN ($1, $2) AND i.indisvalid`,
					knowledge.SpaceOf(emb).IndexName(), knowledge.SpaceOf(emb).ChunkIndexName()).Scan(&valid)
				if err == nil && valid == 2 {
					err = b.pool.QueryRow(ctx, "SELECT indexdef FROM pg_indexes WHERE indexname = $1",
						knowledge.SpaceOf(emb).IndexName()).Scan(&def)
					if err == nil {
						break
					}
				}
				if try == 100 {
					t.Fatalf("the space's two indexes not valid after 100 calls: %d valid, %v", valid, err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if !strings.Contains(def, "vector("+itoa(dims)+")") || !strings.Contains(def, "fake-"+itoa(dims)) {
				t.Fatalf("index %s", def)
			}
			if built, err := knowledge.NewMaintenance(svc, knowledge.MaintenanceConfig{}).EnsureVectorIndex(ctx); err != nil || built {
				t.Fatalf("second ensure: built %v, %v", built, err)
			}

			// The start check: this configuration passes; the same model
			// at another width is refused, naming the setting.
			if _, err := knowledge.CheckEmbeddingSpace(ctx, b.pool, emb, false); err != nil {
				t.Fatal(err)
			}
			other, _ := embed.NewOpenAI(embed.OpenAIConfig{BaseURL: "http://127.0.0.1:1/v1", Model: "fake-" + itoa(dims), Dimensions: 768})
			_, err = knowledge.CheckEmbeddingSpace(ctx, b.pool, other, false)
			var mismatch *knowledge.SpaceMismatchError
			if !errors.As(err, &mismatch) || !mismatch.SameModel() ||
				!strings.Contains(err.Error(), "fake-"+itoa(dims)+" ("+itoa(dims)+" dimensions)") {
				t.Fatalf("another width: %v", err)
			}
			if _, err := knowledge.CheckEmbeddingSpace(ctx, b.pool, other, true); err != nil {
				t.Fatalf("allowed change: %v", err)
			}
			// Re-embedding for the other width takes the org's entries.
			n, err := jobs.ReembedSpace(ctx, b.pool, b.enq, b.org, knowledge.SpaceOf(other), false)
			if err != nil || n != 3 {
				t.Fatalf("reembed for another width: %d, %v", n, err)
			}
		})
	}
}
