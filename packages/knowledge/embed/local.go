package embed

import (
	"context"
	"hash/fnv"
	"math"
	"strings"
	"unicode"
)

// LocalModel is the model name stored with vectors of the local embedder.
const LocalModel = "local-hash-v1"

// Local is the default embedder: deterministic, offline, no model weights.
//
// It is a feature-hashing bag of words: every lowercased word, and every
// character trigram of it, is hashed to one of 768 dimensions with a sign,
// and the sum is L2-normalised. What it captures, honestly: lexical overlap,
// including partial words and small misspellings (through trigrams), so
// cosine similarity ranks texts that share words and word pieces. What it does
// not capture: meaning. Synonyms, paraphrases and other languages score as
// unrelated. It exists so the product runs and is tested end to end on any
// machine; configure an OpenAI-compatible provider for semantic search.
type Local struct{}

// NewLocal returns the local embedder.
func NewLocal() *Local { return &Local{} }

func (*Local) Model() string   { return LocalModel }
func (*Local) Dimensions() int { return Dimensions }

// InProcess marks Local as embed.InProcess.
func (*Local) InProcess() {}

// Embed never fails except when ctx is done.
func (l *Local) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out[i] = l.embedOne(t)
	}
	return out, nil
}

func (*Local) embedOne(text string) []float32 {
	v := make([]float64, Dimensions)
	add := func(feature string, weight float64) {
		h := fnv.New64a()
		h.Write([]byte(feature))
		x := h.Sum64()
		idx := int(x % Dimensions)
		if x&(1<<63) != 0 {
			weight = -weight
		}
		v[idx] += weight
	}
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	for _, w := range words {
		add("w:"+w, 1)
		r := []rune("^" + w + "$")
		for j := 0; j+3 <= len(r); j++ {
			add("t:"+string(r[j:j+3]), 0.35)
		}
	}
	var norm float64
	for _, x := range v {
		norm += x * x
	}
	out := make([]float32, Dimensions)
	if norm == 0 {
		// An empty or symbol-only text still gets a valid unit vector, so
		// cosine distance is defined (pgvector refuses zero vectors' norm).
		out[0] = 1
		return out
	}
	norm = math.Sqrt(norm)
	for i, x := range v {
		out[i] = float32(x / norm)
	}
	return out
}
