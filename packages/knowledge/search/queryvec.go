package search

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/pgvector/pgvector-go"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"

	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
)

// Query vectors: every search needs its query embedded, and with a provider
// behind HTTP that is the slowest step of a search (hosted providers answer
// in 100-300 ms, with tails beyond). Agents repeat queries, so vectors are
// cached, per model and width, in this process (QueryVectorCacheSize
// entries, least recently used out) and in Redis when the Searcher has one
// (shared by every MCP replica, QueryVectorTTL), and a search waits for the
// provider at most Options.QueryEmbedBudget: past it, the answer comes from
// the lexical lists, says so, and the provider's late answer still fills
// the cache for the next search of the same query. An embedder that
// computes in this process (embed.InProcess: the local one) is asked
// directly, without caches or budget: a Redis look-up costs more.
const (
	QueryVectorCacheSize = 4096
	QueryVectorTTL       = 24 * time.Hour
	// DefaultQueryEmbedBudget: beyond a second, a lexical answer now
	// serves an agent better than a hybrid one later.
	DefaultQueryEmbedBudget = time.Second
	// queryVectorRedisWait bounds a cache read or write in Redis: a slow
	// or absent Redis costs a search this much at most, never a failure.
	queryVectorRedisWait = 50 * time.Millisecond
	queryVectorKeyPrefix = "knowledge:qvec:"
)

type queryVectors struct {
	local *lru.Cache[string, []float32]
	// texts holds the vectors of new entries' texts (the duplicate check
	// of a store: EmbedNewText), apart from the queries' so a burst of stores does not
	// evict them; only in this process: a store's text is seldom sent
	// twice but by a retry, and a vector in Redis per stored entry would
	// grow it with the org. Its use is a retry (ifSimilar: skip twice) and
	// a provider that answered after the budget.
	texts  *lru.Cache[string, []float32]
	flight singleflight.Group
}

// TextVectorCacheSize is how many new entries' vectors queryVectors.texts keeps.
const TextVectorCacheSize = 1024

func newQueryVectors() *queryVectors {
	c, err := lru.New[string, []float32](QueryVectorCacheSize)
	if err != nil {
		panic(err) // only for a size <= 0
	}
	t, err := lru.New[string, []float32](TextVectorCacheSize)
	if err != nil {
		panic(err)
	}
	return &queryVectors{local: c, texts: t}
}

// queryVectorKey names a query's vector for one model and width: the
// hash keeps query text (which may hold personal data) out of Redis keys.
func queryVectorKey(model string, dims int, query string) string {
	h := sha256.Sum256([]byte(model + "\x00" + strconv.Itoa(dims) + "\x00" + query))
	return hex.EncodeToString(h[:])
}

// errEmbedBudget says the provider did not answer within the budget.
var errEmbedBudget = errors.New("the embedding provider did not answer within the embed budget")

// embedQuery returns the query's vector from a cache or the provider,
// waiting for the provider at most the budget.
func (s *Searcher) embedQuery(ctx context.Context, query string) ([]float32, error) {
	return s.embedCached(ctx, query, s.qvec.local, true)
}

// EmbedNewText returns the vector of a new entry's text (the duplicate
// check of a store) the way embedQuery does, with the same budget, but
// cached in this process only (queryVectors.texts).
func (s *Searcher) EmbedNewText(ctx context.Context, text string) ([]float32, error) {
	return s.embedCached(ctx, text, s.qvec.texts, false)
}

// NewTextVectorAtHand returns the vector of a new entry's text when this
// process has it already, without asking the provider or Redis: the texts'
// cache (a store of the same text before: a retry, a report or skip that
// waited for it) or the queries' (the text was searched). A store that does
// not wait for the provider checks by meaning with it (entries/similar.go).
// Not for an in-process embedder (ok false): its vectors cost less to make
// than to look up.
func (s *Searcher) NewTextVectorAtHand(text string) (vec []float32, ok bool) {
	e := s.opts.Embedder
	if _, in := e.(embed.InProcess); in {
		return nil, false
	}
	key := queryVectorKey(e.Model(), e.Dimensions(), text)
	if v, ok := s.qvec.texts.Get(key); ok {
		return v, true
	}
	return s.qvec.local.Get(key)
}

// embedCached is embedQuery with its process cache given, and Redis
// (shared) or not.
func (s *Searcher) embedCached(ctx context.Context, query string, local *lru.Cache[string, []float32], shared bool) ([]float32, error) {
	e := s.opts.Embedder
	if _, ok := e.(embed.InProcess); ok {
		return embedOne(ctx, e, query)
	}
	key := queryVectorKey(e.Model(), e.Dimensions(), query)
	if v, ok := local.Get(key); ok {
		return v, nil
	}
	if shared {
		if v := s.cachedQueryVector(ctx, key, e.Dimensions()); v != nil {
			local.Add(key, v)
			return v, nil
		}
	}
	// One provider call per distinct query in flight, detached from this
	// search: a search that stops waiting (budget, cancellation) leaves it
	// running until EmbedTimeout, and its answer fills the cache.
	flightKey := key
	if !shared {
		flightKey = "text:" + key // its answer fills the other cache
	}
	ch := s.qvec.flight.DoChan(flightKey, func() (any, error) {
		// A flight for the key that ended after this search missed the
		// cache (while it read Redis) has filled it: no second call.
		if v, ok := local.Get(key); ok {
			return v, nil
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.EmbedTimeout)
		defer cancel()
		v, err := embedOne(ctx, e, query)
		if err != nil {
			return nil, err
		}
		local.Add(key, v)
		if shared {
			s.cacheQueryVector(ctx, key, v)
		}
		return v, nil
	})
	budget := time.NewTimer(s.opts.QueryEmbedBudget)
	defer budget.Stop()
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.([]float32), nil
	case <-budget.C:
		return nil, errEmbedBudget
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// embedOne asks e for the query's vector and checks that it is one vector
// of e's width.
func embedOne(ctx context.Context, e embed.Embedder, query string) ([]float32, error) {
	vs, err := e.Embed(ctx, []string{query})
	if err != nil {
		return nil, err
	}
	if len(vs) != 1 {
		return nil, fmt.Errorf("embedder returned %d vectors for 1 text", len(vs))
	}
	if len(vs[0]) != e.Dimensions() {
		return nil, fmt.Errorf("embedder returned a %d-dimensional vector", len(vs[0]))
	}
	return vs[0], nil
}

// cachedQueryVector reads a vector from Redis, or nil (none, no Redis, an
// error or a slow answer: the provider is asked instead).
func (s *Searcher) cachedQueryVector(ctx context.Context, key string, dims int) []float32 {
	if s.opts.Redis == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, queryVectorRedisWait)
	defer cancel()
	b, err := s.opts.Redis.Get(ctx, queryVectorKeyPrefix+key).Bytes()
	if err != nil {
		if !errors.Is(err, redis.Nil) {
			s.log().Debug("knowledge: query vector cache read failed", "err", err)
		}
		return nil
	}
	if len(b) != 4*dims {
		return nil
	}
	v := make([]float32, dims)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// cacheQueryVector writes a vector to Redis, best effort.
func (s *Searcher) cacheQueryVector(ctx context.Context, key string, v []float32) {
	if s.opts.Redis == nil {
		return
	}
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	ctx, cancel := context.WithTimeout(ctx, queryVectorRedisWait)
	defer cancel()
	if err := s.opts.Redis.Set(ctx, queryVectorKeyPrefix+key, b, QueryVectorTTL).Err(); err != nil {
		s.log().Debug("knowledge: query vector cache write failed", "err", err)
	}
}

// lexicalFallback ends the notice of a search whose query had no vector.
const lexicalFallback = "; results come from full text and title only"

// queryVector embeds the query, or says why it could not.
func (s *Searcher) queryVector(ctx context.Context, query string) (*pgvector.Vector, string) {
	e := s.opts.Embedder
	if d := e.Dimensions(); d < embed.MinDimensions || d > embed.MaxDimensions {
		s.log().Error("knowledge: embedder has an unsupported width", "model", e.Model(), "dimensions", d)
		return nil, fmt.Sprintf("vector search unavailable: the embedder %q makes %d-dimensional vectors, outside %d to %d%s",
			e.Model(), d, embed.MinDimensions, embed.MaxDimensions, lexicalFallback)
	}
	v, err := s.embedQuery(ctx, query)
	switch {
	case errors.Is(err, errEmbedBudget):
		s.log().Warn("knowledge: query embedding over budget; lexical search only", "model", e.Model(), "budget", s.opts.QueryEmbedBudget)
		return nil, fmt.Sprintf("vector search skipped: the embedding provider did not answer within %v%s", s.opts.QueryEmbedBudget, lexicalFallback)
	case err != nil:
		s.log().Warn("knowledge: query embedding failed; lexical search only", "model", e.Model(), "err", err)
		return nil, "vector search unavailable: the query could not be embedded" + lexicalFallback
	}
	pv := pgvector.NewVector(v)
	return &pv, ""
}
