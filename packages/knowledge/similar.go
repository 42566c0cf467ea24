package knowledge

import (
	"context"
	_ "embed"
	"math"
	"slices"
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
	// similarTail: the newest entries not indexed yet, compared directly
	// (normally none: the indexer runs every half second).
	similarTail = 16
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
func (s *Service) similarAsync(ctx context.Context, org uuid.UUID, title, body string) func(id uuid.UUID) []Similar {
	if s.opts.SkipSimilar {
		return func(uuid.UUID) []Similar { return []Similar{} }
	}
	ctx, cancel := context.WithTimeout(ctx, similarBudget)
	done := make(chan []Similar, 1)
	go func() {
		out, err := s.similar(ctx, org, title, body)
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

// similar finds the head entries of org that look like title and body,
// best first (MaxSimilar + 1 at most: one may be the entry just stored).
func (s *Service) similar(ctx context.Context, org uuid.UUID, title, body string) ([]Similar, error) {
	p := &pipeline{pool: s.pool}
	if err := sqlc.New(p).SimilarConfig(ctx); err != nil {
		return nil, err
	}
	rows, err := p.Query(ctx, similarCandidatesSQL, pgx.NamedArgs{
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
		"tail":            similarTail,
	})
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	mine := wordSet(title, body)
	out := []Similar{}
	for rows.Next() {
		var (
			id          uuid.UUID
			ctitle, cbd string
		)
		if err := rows.Scan(&id, &ctitle, &cbd); err != nil {
			return nil, err
		}
		if sc := jaccard(mine, wordSet(ctitle, cbd)); sc >= SimilarThreshold {
			out = append(out, Similar{ID: id, Title: ctitle, Score: roundScore(sc)})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b Similar) int {
		if a.Score != b.Score {
			if a.Score > b.Score {
				return -1
			}
			return 1
		}
		return strings.Compare(a.ID.String(), b.ID.String())
	})
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
