package main

import (
	"bufio"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/agentfleet/orchestrator/packages/knowledge/rerank"
)

// cachedReranker remembers every score its reranker gave a (query,
// passage) pair in a file of the model's (--embed-cache's folder), so that
// the quality pass of --rerank over several collections, variants and
// embedders asks the provider once per pair: the stand-in of the
// embedserver scores a few dozen passages a second on this machine. A
// reranker scores each pair on its own (a cross-encoder reads the query
// and one passage; the stand-in compares their vectors), so a pair's score
// does not depend on the other passages of the request. Only the quality
// pass and the chance level use it; the latency passes call the provider.
type cachedReranker struct {
	rerank.Reranker
	mu     sync.Mutex
	scores map[[32]byte]float64
	f      *os.File
	w      *bufio.Writer
}

// withRerankCache opens (or creates) dir/<model>.rr and loads it.
func withRerankCache(r rerank.Reranker, dir string) (*cachedReranker, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	name := fmt.Sprintf("%x", sha256.Sum256([]byte(r.Model())))[:16] + ".rr"
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	c := &cachedReranker{Reranker: r, scores: map[[32]byte]float64{}, f: f}
	rd := bufio.NewReader(f)
	rec := make([]byte, 40)
	var good int64
	for {
		if _, err := io.ReadFull(rd, rec); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				break // a torn last record (an interrupted run) is dropped
			}
			return nil, err
		}
		var k [32]byte
		copy(k[:], rec)
		c.scores[k] = math.Float64frombits(binary.LittleEndian.Uint64(rec[32:]))
		good += int64(len(rec))
	}
	if err := f.Truncate(good); err != nil {
		return nil, err
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		return nil, err
	}
	c.w = bufio.NewWriter(f)
	return c, nil
}

func pairKey(query, doc string) [32]byte {
	return sha256.Sum256([]byte(query + "\x00" + doc))
}

// Rerank answers the cached pairs from the cache and asks the reranker
// for the others, in one call; results best first, as a reranker's.
func (c *cachedReranker) Rerank(ctx context.Context, query string, docs []string) ([]rerank.Result, error) {
	out := make([]rerank.Result, len(docs))
	var miss []string
	var at []int
	c.mu.Lock()
	for i, d := range docs {
		if s, ok := c.scores[pairKey(query, d)]; ok {
			out[i] = rerank.Result{Index: i, Score: s}
		} else {
			miss, at = append(miss, d), append(at, i)
		}
	}
	c.mu.Unlock()
	if len(miss) > 0 {
		got, err := c.Reranker.Rerank(ctx, query, miss)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		for _, x := range got {
			i := at[x.Index]
			out[i] = rerank.Result{Index: i, Score: x.Score}
			k := pairKey(query, docs[i])
			c.scores[k] = x.Score
			c.w.Write(k[:])
			c.w.Write(binary.LittleEndian.AppendUint64(nil, math.Float64bits(x.Score)))
		}
		err = c.w.Flush()
		c.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	slices.SortFunc(out, func(a, b rerank.Result) int { return cmp.Or(cmp.Compare(b.Score, a.Score), a.Index-b.Index) })
	return out, nil
}

// Close flushes and closes the cache file.
func (c *cachedReranker) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return errors.Join(c.w.Flush(), c.f.Close())
}
