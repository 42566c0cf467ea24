package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sync"

	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
)

// cachedEmbedder remembers every vector its embedder made in a file of
// the model's (--embed-cache), so that evaluating a real model several
// times (variants, fusion changes) embeds the corpus once: a small model
// on this machine takes minutes for a few thousand abstracts. Vectors are
// the provider's, unchanged; a text is keyed by its SHA-256 with the
// model's name and width. The evaluation of a deployment is the same with
// or without it.
type cachedEmbedder struct {
	embed.Embedder
	mu   sync.Mutex
	vecs map[[32]byte][]float32
	f    *os.File
	w    *bufio.Writer
}

// withCache opens (or creates) dir/<model>-<dims>.vec and loads it.
func withCache(e embed.Embedder, dir string) (*cachedEmbedder, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	name := fmt.Sprintf("%x-%d.vec", sha256.Sum256([]byte(e.Model())), e.Dimensions())
	f, err := os.OpenFile(filepath.Join(dir, name[:16]+name[64:]), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	c := &cachedEmbedder{Embedder: e, vecs: map[[32]byte][]float32{}, f: f}
	r := bufio.NewReader(f)
	dims := e.Dimensions()
	rec := make([]byte, 32+4*dims)
	var good int64
	for {
		if _, err := io.ReadFull(r, rec); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				break // a torn last record (an interrupted run) is dropped
			}
			return nil, err
		}
		var k [32]byte
		copy(k[:], rec)
		v := make([]float32, dims)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(rec[32+4*i:]))
		}
		c.vecs[k] = v
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

func (c *cachedEmbedder) key(text string) [32]byte {
	return sha256.Sum256([]byte(text))
}

// Embed answers cached texts from the cache and asks the embedder for
// the others, in one call.
func (c *cachedEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	var miss []string
	var at []int
	c.mu.Lock()
	for i, t := range texts {
		if v, ok := c.vecs[c.key(t)]; ok {
			out[i] = v
		} else {
			miss, at = append(miss, t), append(at, i)
		}
	}
	c.mu.Unlock()
	if len(miss) == 0 {
		return out, nil
	}
	got, err := c.Embedder.Embed(ctx, miss)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for j, v := range got {
		out[at[j]] = v
		k := c.key(miss[j])
		if _, ok := c.vecs[k]; ok || len(v) != c.Dimensions() {
			continue
		}
		c.vecs[k] = v
		c.w.Write(k[:])
		for _, x := range v {
			c.w.Write(binary.LittleEndian.AppendUint32(nil, math.Float32bits(x)))
		}
	}
	return out, c.w.Flush()
}

// Close flushes and closes the cache file.
func (c *cachedEmbedder) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return errors.Join(c.w.Flush(), c.f.Close())
}
