package simkeys

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"strconv"
	"strings"
	"unicode"

	"github.com/google/uuid"
)

// EntryWords is what the duplicate check knows of an entry: its word set
// (the Jaccard measure) and the keys made from it (the index look-up and
// the stored column). A store computes it once for both.
type EntryWords struct {
	Set  map[string]struct{}
	Keys []int64
}

func WordsOf(org uuid.UUID, title, body string) EntryWords {
	set := WordSet(title, body)
	return EntryWords{Set: set, Keys: SimilarKeys(org, set)}
}

// WordSet is the set of words of an entry: runs of letters and digits,
// lower-cased, without English stop words and one-letter words. No
// stemming: near-duplicates share their word forms, and a stemmer would
// tie this measure to one language's configuration. Chinese, Japanese and
// Korean runs, which have no spaces between words, give their overlapping
// character bigrams, as the index cuts them (db/migrations/00013_cjk.sql).
func WordSet(title, body string) map[string]struct{} {
	set := make(map[string]struct{}, 64)
	add := func(text string) {
		for w := range strings.FieldsFuncSeq(text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
			w = strings.ToLower(w)
			if _, stop := StopWords[w]; stop {
				continue
			}
			if len(w) == 1 && !unicode.IsDigit(rune(w[0])) {
				continue
			}
			if !HasCJK(w) {
				set[w] = struct{}{}
				continue
			}
			for _, g := range CjkWords(w) {
				set[g] = struct{}{}
			}
		}
	}
	add(title)
	add(body)
	return set
}

func Jaccard(a, b map[string]struct{}) float64 {
	if len(a) == 0 || len(b) == 0 {
		return 0
	}
	if len(a) > len(b) {
		a, b = b, a
	}
	inter := 0
	for w := range a {
		if _, ok := b[w]; ok {
			inter++
		}
	}
	return float64(inter) / float64(len(a)+len(b)-inter)
}

// StopWords: the most frequent English function words, which say nothing
// about what an entry is about.
var StopWords = func() map[string]struct{} {
	m := map[string]struct{}{}
	for _, w := range strings.Fields(`a an and are as at be been being but by can could did do does for from had has have
		he her his i if in into is it its me my no not of on or our she so such than that the their them then there
		these they this those to too us was we were what when where which who why will with would you your also may`) {
		m[w] = struct{}{}
	}
	return m
}()

// Locality-sensitive keys of an entry's word set (migration 00009): a
// MinHash signature of similarHashes values cut into bands of
// similarBandRows; each band is one key, salted with the org. Two entries
// share a band's key with probability J^similarBandRows (J their Jaccard
// similarity), so they share at least one key with probability
// 1 - (1 - J^3)^16: 0.65 at J = 0.4 (the threshold), 0.88 at 0.5, 0.98 at
// 0.6, 0.9998 at 0.8; two entries on one subject (J ~ 0.15) share one
// with 0.05, unrelated ones (J ~ 0.03) with 0.0004. They find the
// near-duplicates the rare-term candidates cannot (text made only of words
// common in the org) and are cheap to look up in any org size.
const (
	SimilarBandRows = 3
	SimilarBands    = 16
	SimilarHashes   = SimilarBandRows * SimilarBands
)

// SimilarSeeds are the MinHash permutations' seeds: fixed forever (keys
// stored with one set are compared with keys made with the same set).
var SimilarSeeds = func() [SimilarHashes]uint64 {
	var s [SimilarHashes]uint64
	x := uint64(0x9e3779b97f4a7c15)
	for i := range s {
		x = Mix64(x + uint64(i) + 1)
		s[i] = x
	}
	return s
}()

// Mix64 is SplitMix64's finaliser: a bijective, well-mixed 64-bit hash.
func Mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// SimilarKeys returns the keys of an entry of org with words ws; empty
// when it has no words.
func SimilarKeys(org uuid.UUID, ws map[string]struct{}) []int64 {
	if len(ws) == 0 {
		return []int64{}
	}
	var sig [SimilarHashes]uint64
	for i := range sig {
		sig[i] = math.MaxUint64
	}
	for w := range ws {
		h := fnv.New64a()
		h.Write([]byte(w))
		base := h.Sum64()
		for i, seed := range SimilarSeeds {
			if v := Mix64(base ^ seed); v < sig[i] {
				sig[i] = v
			}
		}
	}
	keys := make([]int64, SimilarBands)
	var buf [16 + 1 + 8*SimilarBandRows]byte
	copy(buf[:16], org[:])
	for b := range SimilarBands {
		buf[16] = byte(b)
		for r := range SimilarBandRows {
			binary.LittleEndian.PutUint64(buf[17+8*r:], sig[b*SimilarBandRows+r])
		}
		h := fnv.New64a()
		h.Write(buf[:])
		keys[b] = int64(h.Sum64())
	}
	return keys
}

// KeysLiteral writes keys as a PostgreSQL array literal.
func KeysLiteral(keys []int64) string {
	var sb strings.Builder
	sb.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.FormatInt(k, 10))
	}
	sb.WriteByte('}')
	return sb.String()
}

// IsCJK reports whether r is written without spaces between words.
func IsCJK(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul)
}

func HasCJK(w string) bool {
	return strings.IndexFunc(w, IsCJK) >= 0
}

// CjkWords cuts a word holding CJK characters into its other runs, whole,
// and the overlapping bigrams of its CJK runs (a run of one character is
// itself).
func CjkWords(w string) []string {
	var out []string
	rs := []rune(w)
	for i := 0; i < len(rs); {
		j := i + 1
		for j < len(rs) && IsCJK(rs[j]) == IsCJK(rs[i]) {
			j++
		}
		run := rs[i:j]
		switch {
		case !IsCJK(run[0]):
			if len(run) > 1 {
				out = append(out, string(run))
			}
		case len(run) == 1:
			out = append(out, string(run))
		default:
			for k := 0; k+1 < len(run); k++ {
				out = append(out, string(run[k:k+2]))
			}
		}
		i = j
	}
	return out
}
