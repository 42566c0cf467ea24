package knowledge

import (
	"context"
	_ "embed"
	"encoding/binary"
	"hash/fnv"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
)

// Similar is an existing head entry that looks like the same knowledge as
// a new one (store_knowledge's answer): the agent should read it and, if it
// says the same, supersede or forget instead of piling up duplicates.
type Similar struct {
	ID    uuid.UUID `json:"id"`
	Title string    `json:"title"`
	// Score is the Jaccard similarity of the two entries' word sets (title
	// and body, lower-cased, English stop words left out): 1 is the same
	// words, SimilarThreshold the least reported.
	Score float64 `json:"score"`
}

// The duplicate check (docs/knowledge.md, "Duplicates at store time"; its
// threshold is measured by apps/eval -dups).
const (
	// SimilarThreshold is the least word-set Jaccard similarity reported.
	// On the pair set of apps/eval -dups, near-duplicates score 0.5 and
	// more (a rewording, a trimmed or extended copy) and distinct entries
	// on the same subject at most about 0.25.
	SimilarThreshold = 0.4
	// MaxSimilar is how many similar entries an answer lists.
	MaxSimilar = 3
	// similarRareTerms: how many of the new text's rarest indexed terms
	// find the candidates; similarMinShared: how many of them a candidate
	// must hold (fewer when the text has fewer indexed terms).
	similarRareTerms = 24
	similarMinShared = 2
	// similarMaxPostings bounds each rare term's read, and
	// similarPostingsBudget the rare terms' postings in all (the two
	// rarest are always read).
	similarMaxPostings    = 200
	similarPostingsBudget = 1000
	// similarCandidates: how many indexed candidates are compared.
	similarCandidates = 10
	// similarMaxKeyHits bounds the entries sharing a key that are ranked
	// (many only when many entries hold the same few words).
	similarMaxKeyHits = 500
	// similarAnalysedChars: the part of a new body that is analysed; a
	// duplicate shares its beginning too.
	similarAnalysedChars = 4000
)

// similarBudget bounds the duplicate check's wait: past it the store
// answers without similar entries (and logs why).
const similarBudget = 250 * time.Millisecond

// similarAsync starts the duplicate check for a new entry of org and
// returns the function that waits for its answer, leaving out the new
// entry (id), which the check sees if the store committed first. The
// answer is [] on failure or past similarBudget; the failure is logged,
// never returned: a store does not fail for want of advice.
func (s *Service) similarAsync(ctx context.Context, org uuid.UUID, title, body string, w entryWords) func(id uuid.UUID) []Similar {
	if s.opts.SkipSimilar {
		return func(uuid.UUID) []Similar { return []Similar{} }
	}
	ctx, cancel := context.WithTimeout(ctx, similarBudget)
	done := make(chan []Similar, 1)
	go func() {
		out, err := s.similarWith(ctx, org, title, body, w, nil)
		if err != nil {
			s.log().Warn("knowledge: duplicate check failed; the store answers without similar entries", "org", org, "err", err)
			out = nil
		}
		done <- out
	}()
	return func(id uuid.UUID) []Similar {
		defer cancel()
		out := slices.DeleteFunc(<-done, func(x Similar) bool { return x.ID == id })
		if len(out) > MaxSimilar {
			out = out[:MaxSimilar]
		}
		return append([]Similar{}, out...)
	}
}

func roundScore(v float64) float64 { return math.Round(v*1000) / 1000 }

//go:embed sql/similar_candidates.sql
var similarCandidatesSQL string

// similarCandidatesStmt is similarCandidatesSQL made positional once (namedSQL).
var similarCandidatesStmt = &namedSQL{src: similarCandidatesSQL}

// similarWith finds the head entries of org that look like title and body
// (whose words are w), best first (MaxSimilar + 1 at most: one may be the
// entry just stored). override replaces some of the statement's arguments
// (tests take one way to the candidates away to test another).
func (s *Service) similarWith(ctx context.Context, org uuid.UUID, title, body string, w entryWords, override pgx.NamedArgs) ([]Similar, error) {
	p := &pipeline{pool: s.pool}
	if err := sqlc.New(p).SimilarConfig(ctx); err != nil {
		return nil, err
	}
	args := pgx.NamedArgs{
		"org_id":          org,
		"default_config":  s.opts.TextSearchConfig,
		"title":           title,
		"body":            body,
		"analysed_chars":  similarAnalysedChars,
		"rare_terms":      similarRareTerms,
		"max_postings":    similarMaxPostings,
		"postings_budget": similarPostingsBudget,
		"min_shared":      similarMinShared,
		"candidates":      similarCandidates,
		"keys":            w.keys,
		"max_key_hits":    similarMaxKeyHits,
	}
	for k, v := range override {
		args[k] = v
	}
	rows, err := similarCandidatesStmt.query(ctx, p, args)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Similar{}
	for rows.Next() {
		var (
			id          uuid.UUID
			ctitle, cbd string
		)
		if err := rows.Scan(&id, &ctitle, &cbd); err != nil {
			return nil, err
		}
		if sc := jaccard(w.set, wordSet(ctitle, cbd)); sc >= SimilarThreshold {
			out = append(out, Similar{ID: id, Title: ctitle, Score: roundScore(sc)})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Similar) int { return bestFirst(a.Score, a.ID, b.Score, b.ID) })
	if len(out) > MaxSimilar+1 {
		out = out[:MaxSimilar+1]
	}
	return out, nil
}

// SimilarScore is the duplicate check's measure of two entries: the
// Jaccard similarity of their word sets (exported for apps/eval).
func SimilarScore(titleA, bodyA, titleB, bodyB string) float64 {
	return jaccard(wordSet(titleA, bodyA), wordSet(titleB, bodyB))
}

// entryWords is what the duplicate check knows of an entry: its word set
// (the Jaccard measure) and the keys made from it (the index look-up and
// the stored column). A store computes it once for both.
type entryWords struct {
	set  map[string]struct{}
	keys []int64
}

func wordsOf(org uuid.UUID, title, body string) entryWords {
	set := wordSet(title, body)
	return entryWords{set: set, keys: similarKeys(org, set)}
}

// wordSet is the set of words of an entry: runs of letters and digits,
// lower-cased, without English stop words and one-letter words. No
// stemming: near-duplicates share their word forms, and a stemmer would
// tie this measure to one language's configuration.
func wordSet(title, body string) map[string]struct{} {
	set := make(map[string]struct{}, 64)
	add := func(text string) {
		for w := range strings.FieldsFuncSeq(text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
			w = strings.ToLower(w)
			if _, stop := stopWords[w]; stop {
				continue
			}
			if len(w) == 1 && !unicode.IsDigit(rune(w[0])) {
				continue
			}
			set[w] = struct{}{}
		}
	}
	add(title)
	add(body)
	return set
}

func jaccard(a, b map[string]struct{}) float64 {
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

// stopWords: the most frequent English function words, which say nothing
// about what an entry is about.
var stopWords = func() map[string]struct{} {
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
	similarBandRows = 3
	similarBands    = 16
	similarHashes   = similarBandRows * similarBands
)

// similarSeeds are the MinHash permutations' seeds: fixed forever (keys
// stored with one set are compared with keys made with the same set).
var similarSeeds = func() [similarHashes]uint64 {
	var s [similarHashes]uint64
	x := uint64(0x9e3779b97f4a7c15)
	for i := range s {
		x = mix64(x + uint64(i) + 1)
		s[i] = x
	}
	return s
}()

// mix64 is SplitMix64's finaliser: a bijective, well-mixed 64-bit hash.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// similarKeys returns the keys of an entry of org with words ws; empty
// when it has no words.
func similarKeys(org uuid.UUID, ws map[string]struct{}) []int64 {
	if len(ws) == 0 {
		return []int64{}
	}
	var sig [similarHashes]uint64
	for i := range sig {
		sig[i] = math.MaxUint64
	}
	for w := range ws {
		h := fnv.New64a()
		h.Write([]byte(w))
		base := h.Sum64()
		for i, seed := range similarSeeds {
			if v := mix64(base ^ seed); v < sig[i] {
				sig[i] = v
			}
		}
	}
	keys := make([]int64, similarBands)
	var buf [16 + 1 + 8*similarBandRows]byte
	copy(buf[:16], org[:])
	for b := range similarBands {
		buf[16] = byte(b)
		for r := range similarBandRows {
			binary.LittleEndian.PutUint64(buf[17+8*r:], sig[b*similarBandRows+r])
		}
		h := fnv.New64a()
		h.Write(buf[:])
		keys[b] = int64(h.Sum64())
	}
	return keys
}

// keysLiteral writes keys as a PostgreSQL array literal.
func keysLiteral(keys []int64) string {
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

// similarBackfillBatch and similarBackfillMax: Upkeep gives entries
// without keys (stored before migration 00009; an import writes them) theirs, this
// many per statement, at most this many per pass.
const (
	similarBackfillBatch = 1000
	similarBackfillMax   = 50000
)

// backfillSimilarKeys fills in the keys of entries that have none, and
// returns how many it did.
func (s *Service) backfillSimilarKeys(ctx context.Context) (int, error) {
	done := 0
	for done < similarBackfillMax {
		q := sqlc.New(&pipeline{pool: s.pool})
		if err := q.ListConfig(ctx); err != nil { // no sort, no scan: the partial index in order
			return done, err
		}
		rows, err := q.SimilarKeysMissing(ctx, similarBackfillBatch)
		if err != nil || len(rows) == 0 {
			return done, err
		}
		p := sqlc.SetSimilarKeysParams{}
		for _, r := range rows {
			p.OrgIds = append(p.OrgIds, r.OrgID)
			p.Ids = append(p.Ids, r.ID)
			p.Keys = append(p.Keys, keysLiteral(wordsOf(r.OrgID, r.Title, r.Body).keys))
		}
		if err := s.q.SetSimilarKeys(ctx, p); err != nil {
			return done, err
		}
		done += len(rows)
	}
	return done, nil
}
