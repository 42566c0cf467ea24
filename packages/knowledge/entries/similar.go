package entries

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/pgbatch"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/rank"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/simkeys"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
	"github.com/agentfleet/orchestrator/packages/knowledge/outbox"
	"github.com/agentfleet/orchestrator/packages/knowledge/search"
)

// The duplicate check (docs/knowledge.md, "Duplicates at store time"; its
// thresholds are measured by apps/eval -dups).
const (
	// SimilarThreshold is the least score reported. As a word score: on
	// the NFCorpus pair set of apps/eval -dups, near-duplicates score 0.5
	// and more (a rewording, a trimmed or extended copy) and distinct
	// entries on the same subject at most about 0.25. As a meaning score:
	// the cosine at which the model's calibration gives full evidence
	// (VectorCalibration.Full, "a close paraphrase"; MeaningScore).
	SimilarThreshold = 0.4
	// SkipThreshold is the least score at which store_knowledge with
	// ifSimilar: skip takes an existing entry for the same knowledge and
	// stores nothing. Higher than SimilarThreshold: a listing asks the
	// agent to read and judge; a skip decides for it. As a word score,
	// 0.8 is a copy with a tenth of its words changed (apps/eval -dups:
	// rewordings and edits score 0.80-0.96, the highest distinct pairs of
	// NFCorpus, one report series, 0.83 and 0.89); as a meaning score, a
	// cosine two thirds of the way from the model's Full point to 1.
	SkipThreshold = 0.8
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
	// similarCandidates: how many indexed candidates are compared, and
	// how many nearest vectors.
	similarCandidates = 10
	// similarMaxKeyHits bounds the entries sharing a key that are ranked
	// (many only when many entries hold the same few words).
	similarMaxKeyHits = 500
	// similarAnalysedChars: the part of a new body that is analysed; a
	// duplicate shares its beginning too.
	similarAnalysedChars = 4000
)

// How the duplicate check was made (StoreResult.SimilarCheck).
const (
	// SimilarCheckWordsMeaning: by words and by meaning (the new text's
	// vector against the org's).
	SimilarCheckWordsMeaning = "words+meaning"
	// SimilarCheckWords: by words only: the new text had no vector (none
	// at hand and the caller did not ask to wait for the provider: the
	// worker finishes the check, StoreResult.SimilarPending; or past the
	// embed budget, or the embedder failed or has an unsupported width),
	// the vector statement failed, or the embedder is the in-process one
	// (local), whose vectors are lexical.
	SimilarCheckWords = "words"
	// SimilarCheckMeaning: by meaning only (the word statement failed).
	SimilarCheckMeaning = "meaning"
	// SimilarCheckNone: neither answered (or the check is off); similar
	// is [] for want of a check, not for want of duplicates.
	SimilarCheckNone = "none"
)

// similarBudget bounds each statement of the duplicate check (the words',
// then the vectors'; Options.SimilarBudget replaces it for tests);
// the new text's vector, when the caller waits for it, is waited for at
// most the embed budget (search.Options.QueryEmbedBudget), beside the word
// statement. Past them the store answers with what it has (and logs why).
const similarBudget = 250 * time.Millisecond

// MeaningScore puts the cosine of two entries' vectors on the duplicate
// check's scale, with the model's calibration (internal/rank): below the cosine
// at which search's evidence is full (cal.Full, what the model gives a
// close paraphrase) the score is under SimilarThreshold (not reported);
// from there it rises linearly to 1 at cosine 1 (the same text), so it
// is SimilarThreshold at Full and SkipThreshold two thirds of the way to
// 1. A pair that search would not give full evidence is never reported
// by meaning.
func MeaningScore(cal search.VectorCalibration, cosine float64) float64 {
	if cal.Evidence(cosine) < 1 {
		return 0
	}
	full := cal.Full
	if full <= cal.Floor { // evidence() then reads the cosine itself
		full = 1
	}
	if full >= 1 {
		return 1
	}
	return rank.Clamp01(SimilarThreshold + (1-SimilarThreshold)*(cosine-full)/(1-full))
}

// similarOutcome is the answer of the duplicate check.
type similarOutcome struct {
	list  []domain.Similar // best first
	check string           // SimilarCheck*
	// vec is the new text's vector when the Search's own embedder made
	// it (not a next model's: see search.Searcher.ServedBy), and whole says it is
	// the vector the embeddings worker would make for the entry (its text
	// is one chunk): the store then writes it as the entry's own.
	vec   []float32
	whole bool
	// owed: the check by meaning applies but was not made (no vector, or
	// its statement failed): the worker owes it once the entry is embedded.
	owed bool
}

// best is the best listing, if any.
func (o similarOutcome) best() (domain.Similar, bool) {
	if len(o.list) == 0 {
		return domain.Similar{}, false
	}
	return o.list[0], true
}

// meaningPlan is how the check by meaning of a new text goes, decided
// before the store's insert: with which model (the one serving the org),
// on what text, and with which vector, if one is at hand.
type meaningPlan struct {
	sv *search.Searcher
	// off says why there is no check by meaning at all (the in-process
	// embedder, an unsupported width); nil when there is one.
	off   error
	text  string
	whole bool      // text is the whole entry (one chunk)
	vec   []float32 // at hand in this process (search.NewTextVectorAtHand); nil: none
}

// owed says whether the check by meaning applies but has no vector yet.
func (p meaningPlan) owed() bool { return p.off == nil && p.vec == nil }

// planMeaning decides the check by meaning of a new entry of org. It does
// no I/O but, with a model switch configured, the read of the org's model
// (cached, search.Searcher.ServedBy).
func (s *Entries) planMeaning(ctx context.Context, org uuid.UUID, title, body string) meaningPlan {
	sv := s.opts.Search.ServedBy(ctx, org) // the next model's, if the org has cut over
	p := meaningPlan{sv: sv}
	e := sv.Embedder()
	if _, ok := e.(embed.InProcess); ok {
		p.off = errLexicalEmbedder
		return p
	}
	if d := e.Dimensions(); d < embed.MinDimensions || d > embed.MaxDimensions {
		p.off = fmt.Errorf("the embedder %q makes %d-dimensional vectors, outside %d to %d", e.Model(), d, embed.MinDimensions, embed.MaxDimensions)
		return p
	}
	p.text, p.whole = s.newEntryText(sv, title, body)
	p.vec, _ = sv.NewTextVectorAtHand(p.text)
	return p
}

// similarAsync starts the duplicate check for a new entry of org and
// returns the function that waits for its answer, leaving out the new
// entry (id), which the check sees if the store committed first, and
// whether the check by meaning is owed to the worker as far as is known
// now (without wait: no vector at hand). With wait the check asks the
// provider for the new text's vector (within the embed budget) when none
// is at hand; without, it never does. A part of the check that fails or
// runs out of budget is logged, never returned, and the answer's check
// says what was left: a store does not fail for want of advice.
func (s *Entries) similarAsync(ctx context.Context, org uuid.UUID, title, body string, w simkeys.EntryWords, wait bool) (func(id uuid.UUID) similarOutcome, bool) {
	if s.opts.SkipSimilar {
		return func(uuid.UUID) similarOutcome {
			return similarOutcome{list: []domain.Similar{}, check: SimilarCheckNone}
		}, false
	}
	plan := s.planMeaning(ctx, org, title, body)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan similarOutcome, 1)
	go func() { done <- s.similarCheck(ctx, org, title, body, w, plan, wait) }()
	return func(id uuid.UUID) similarOutcome {
		defer cancel()
		out := <-done
		list := slices.DeleteFunc(out.list, func(x domain.Similar) bool { return x.ID == id })
		if len(list) > MaxSimilar {
			list = list[:MaxSimilar]
		}
		out.list = append([]domain.Similar{}, list...)
		return out
	}, plan.owed()
}

// errLeftToWorker: no vector of the new text at hand, and the caller did
// not ask to wait for the provider's: the embeddings worker checks by
// meaning once it has embedded the entry (finish.go).
var errLeftToWorker = errors.New("no vector at hand: the worker checks by meaning after embedding the entry")

// similarCheck runs the duplicate check: the word statement while the new
// text's vector is found (plan; with wait, from the provider if need be),
// then the vector statement, and merges their listings.
func (s *Entries) similarCheck(ctx context.Context, org uuid.UUID, title, body string, w simkeys.EntryWords, plan meaningPlan, wait bool) similarOutcome {
	sv := plan.sv
	vch := make(chan []float32, 1)
	ech := make(chan error, 1)
	go func() {
		v, err := meaningVector(ctx, plan, wait)
		vch <- v
		ech <- err
	}()
	wctx, wcancel := context.WithTimeout(ctx, s.opts.SimilarBudget)
	byWords, werr := s.similarWith(wctx, org, title, body, w, nil)
	wcancel()
	if werr != nil {
		s.log().Warn("knowledge: duplicate check by words failed", "org", org, "err", werr)
	}
	vec, verr := <-vch, <-ech
	var byMeaning []domain.Similar
	merr := verr
	if merr == nil {
		mctx, mcancel := context.WithTimeout(ctx, s.opts.SimilarBudget)
		byMeaning, merr = similarByVector(mctx, sv, org, vec)
		mcancel()
	}
	if merr != nil && !errors.Is(merr, errLexicalEmbedder) && !errors.Is(merr, errLeftToWorker) {
		s.log().Warn("knowledge: duplicate check by meaning left out", "org", org, "model", sv.Embedder().Model(), "err", merr)
	}
	out := similarOutcome{list: mergeSimilar(byWords, byMeaning), owed: plan.off == nil && merr != nil}
	switch {
	case werr == nil && merr == nil:
		out.check = SimilarCheckWordsMeaning
	case werr == nil:
		out.check = SimilarCheckWords
	case merr == nil:
		out.check = SimilarCheckMeaning
	default:
		out.check = SimilarCheckNone
	}
	if verr == nil && sv == s.opts.Search {
		out.vec, out.whole = vec, plan.whole
	}
	return out
}

// meaningVector is the new text's vector for the check by meaning, or why
// there is none: the one at hand; else, with wait, the provider's (the
// query vector's rules and budget: search's queryvec.go); else none
// (errLeftToWorker).
func meaningVector(ctx context.Context, p meaningPlan, wait bool) ([]float32, error) {
	switch {
	case p.off != nil:
		return nil, p.off
	case p.vec != nil:
		return p.vec, nil
	case wait:
		return p.sv.EmbedNewText(ctx, p.text)
	default:
		return nil, errLeftToWorker
	}
}

// errLexicalEmbedder: the in-process embedder (local) hashes character
// trigrams: its cosine measures shared spelling, which the word score
// measures better, and on NFCorpus abstracts it listed distinct entries of
// one study cluster (apps/eval -dups, docs/benchmarks.md). With it the
// check is by words.
var errLexicalEmbedder = errors.New("the in-process embedder's vectors are lexical: the check is by words")

// newEntryText is the text the embeddings worker embeds first for an
// entry when sv serves the org (its first chunk, cut as the worker cuts:
// Options.Chunk for the Search's own model, the default cut of a next
// model's; DefaultMaxInputChars), and whether that is the whole entry
// (one chunk).
func (s *Entries) newEntryText(sv *search.Searcher, title, body string) (string, bool) {
	o := s.opts.Chunk
	if sv != s.opts.Search {
		o = outbox.ChunkOptionsFor(sv.Embedder().Model())
	}
	rs := []rune(body)
	spans := outbox.Chunks(title, rs, o)
	return domain.ClipRunes(outbox.ChunkText(title, rs, spans[0]), outbox.DefaultMaxInputChars), len(spans) == 1
}

// similarByVector lists the org's head, unexpired entries nearest to vec
// (similarCandidates of them, found as search's vector list finds them:
// search.VectorNeighbours) whose meaning score, by sv's calibration,
// reaches SimilarThreshold, best first.
func similarByVector(ctx context.Context, sv *search.Searcher, org uuid.UUID, vec []float32) ([]domain.Similar, error) {
	near, err := sv.VectorNeighbours(ctx, org, vec, similarCandidates)
	if err != nil {
		return nil, err
	}
	out := []domain.Similar{}
	for _, c := range near {
		if sc := MeaningScore(sv.Calibration(), c.Cosine); sc >= SimilarThreshold {
			out = append(out, domain.Similar{ID: c.ID, Title: c.Title, Score: roundScore(sc)})
		}
	}
	return out, nil
}

// mergeSimilar joins the listings by words and by meaning: an entry in
// both scores the larger of its two scores. Best first, MaxSimilar + 1 at
// most (one may be the entry just stored).
func mergeSimilar(lists ...[]domain.Similar) []domain.Similar {
	out := []domain.Similar{}
	at := map[uuid.UUID]int{}
	for _, l := range lists {
		for _, x := range l {
			if i, ok := at[x.ID]; ok {
				out[i].Score = max(out[i].Score, x.Score)
				continue
			}
			at[x.ID] = len(out)
			out = append(out, x)
		}
	}
	slices.SortFunc(out, func(a, b domain.Similar) int { return rank.BestFirst(a.Score, a.ID, b.Score, b.ID) })
	if len(out) > MaxSimilar+1 {
		out = out[:MaxSimilar+1]
	}
	return out
}

func roundScore(v float64) float64 { return math.Round(v*1000) / 1000 }

//go:embed sql/similar_candidates.sql
var similarCandidatesSQL string

// similarCandidatesStmt is similarCandidatesSQL made positional once (pgbatch.Named).
var similarCandidatesStmt = pgbatch.NewNamed(similarCandidatesSQL)

// similarSettings are SimilarConfig's (queries/knowledge.sql).
var similarSettings = []string{"plan_cache_mode", "force_generic_plan", "enable_seqscan", "off", "jit", "off"}

// similarWith finds the head entries of org that look like title and body
// (whose words are w), best first (MaxSimilar + 1 at most: one may be the
// entry just stored). override replaces some of the statement's arguments
// (tests take one way to the candidates away to test another).
func (s *Entries) similarWith(ctx context.Context, org uuid.UUID, title, body string, w simkeys.EntryWords, override pgx.NamedArgs) ([]domain.Similar, error) {
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
		"keys":            w.Keys,
		"max_key_hits":    similarMaxKeyHits,
	}
	for k, v := range override {
		args[k] = v
	}
	rows, ok, err := s.data.OnWorker(ctx, similarCandidatesStmt, org, similarSettings, args)
	if !ok && err == nil {
		p := pgbatch.New(s.pool)
		if err := sqlc.New(p).SimilarConfig(ctx); err != nil {
			return nil, err
		}
		rows, err = similarCandidatesStmt.Query(ctx, p, args)
	}
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []domain.Similar{}
	for rows.Next() {
		var (
			id          uuid.UUID
			ctitle, cbd string
		)
		if err := rows.Scan(&id, &ctitle, &cbd); err != nil {
			return nil, err
		}
		if sc := simkeys.Jaccard(w.Set, simkeys.WordSet(ctitle, cbd)); sc >= SimilarThreshold {
			out = append(out, domain.Similar{ID: id, Title: ctitle, Score: roundScore(sc)})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b domain.Similar) int { return rank.BestFirst(a.Score, a.ID, b.Score, b.ID) })
	if len(out) > MaxSimilar+1 {
		out = out[:MaxSimilar+1]
	}
	return out, nil
}

// SimilarScore is the duplicate check's word score of two entries: the
// Jaccard similarity of their word sets (exported for apps/eval).
func SimilarScore(titleA, bodyA, titleB, bodyB string) float64 {
	return simkeys.Jaccard(simkeys.WordSet(titleA, bodyA), simkeys.WordSet(titleB, bodyB))
}
