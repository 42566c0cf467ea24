package search

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/rank"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/snippet"
	"github.com/agentfleet/orchestrator/packages/knowledge/rerank"
)

// Reranking (docs/knowledge.md, "Reranking"): with a reranker configured
// (Options.Reranker), a search sends the fused top RerankTopN candidates,
// each as its title and best passage, to it, waits at most RerankBudget,
// and fuses its scores into theirs (internal/rank.Rerank); then the cut at
// the limit, the hops and the token budget apply to that order. Past the
// budget, on an error, or with the breaker open (package rerank), the
// fused order stands; the answer says which (SearchResult.Reranked,
// RerankReason), and nothing fails.
const (
	// DefaultRerankTopN: the candidates a reranker reads. A default search
	// answers 10; the fused ranks 11 to 30 are those a reranker can most
	// often lift into them (a relevant entry the lists ranked lower still
	// is rare, and every candidate costs the provider time: a
	// cross-encoder's cost grows with candidates times their tokens). 30
	// also fits TEI's default of 32 texts a request, and leaves the
	// reranker's crowd floor (its 20th score, internal/rank) in force.
	DefaultRerankTopN = 30
	// MaxRerankTopN bounds RerankTopN.
	MaxRerankTopN = 100
	// DefaultRerankBudget: a search's time up to the reranker's answer. A
	// cross-encoder on a GPU scores 30 passages in 20-100 ms, hosted APIs
	// answer in 100-300 ms; past that an agent is better served by the
	// fused order now.
	DefaultRerankBudget = 300 * time.Millisecond
	// RerankPassageChars bounds the passage of a candidate the reranker
	// reads, after its title: about 250 tokens of English, so query, title
	// and passage fit the 512 tokens most cross-encoders read, whatever
	// the body's length (up to 32,000 characters).
	RerankPassageChars = 1000
)

// RerankCalibration maps a reranker's scores to evidence, as
// VectorCalibration does cosines: Floor is what an unrelated passage
// typically scores, Full what one that answers the query does.
type RerankCalibration = rank.Calibration

// DefaultRerankCalibration is used for models without a measured
// calibration: the sigmoid scale of the cross-encoders the presets' servers
// run (unrelated pairs under 0.1, passages that answer above 0.8). It is a
// conservative middle, not a measurement: measure yours with apps/eval and
// set Config.RerankCalibration (RERANK_SCORE_FLOOR, RERANK_SCORE_FULL).
var DefaultRerankCalibration = RerankCalibration{Floor: 0.1, Full: 0.8}

// knownRerankCalibrations are measured per model (docs/benchmarks.md,
// "Score bands": Reranking).
var knownRerankCalibrations = map[string]RerankCalibration{
	// The stand-in of ../shared/tools/embedserver: USE-lite's cosine of
	// the query and a candidate's title and passage, clipped to 0..1. Its
	// chance level over NFCorpus (20 nonsense queries, 30 passages each)
	// is 0.350, lower than the vector list's 0.455 over whole bodies, and
	// the floor clears it as the local embedder's 0.25 clears 0.21; full
	// is USE-lite's paraphrase median (0.73; rrf.go).
	"use-lite-rerank-standin": {Floor: 0.40, Full: 0.75},
}

// RerankCalibrationFor returns the calibration of a reranking model: a
// measured one if there is one, else DefaultRerankCalibration.
func RerankCalibrationFor(model string) RerankCalibration {
	if c, ok := knownRerankCalibrations[model]; ok {
		return c
	}
	return DefaultRerankCalibration
}

var tracer = otel.Tracer("github.com/agentfleet/orchestrator/packages/knowledge/search")

// The rerank span's attributes (never the query or a passage).
const (
	attrRerankModel      = attribute.Key("knowledge.rerank.model")
	attrRerankCandidates = attribute.Key("knowledge.rerank.candidates")
	attrRerankOutcome    = attribute.Key("knowledge.rerank.outcome")
)

// rerankOK is the outcome of a rerank that ordered the hits.
const rerankOK = "ok"

// rerank orders r's fused hits with the reranker, in place, and says
// whether it did (reason "" when it did). The bodies it read for the
// passages are returned for the answer's snippets. Its only error is the
// caller's (a cancelled search) or the bodies' read.
//
// The reranker answers by the search's start (began) plus RerankBudget:
// it gets what the ranking left of the budget, so that a search answers
// within the budget and the little work after the reranker whatever the
// reranker does. A ranking that spent the whole budget leaves the fused
// order without calling it (timeout; not a failure of the provider, so
// the breaker does not count it).
func (s *Searcher) rerank(ctx context.Context, org uuid.UUID, a *domain.SearchArgs, r *ranked, began time.Time) (reason string, bodies map[uuid.UUID]hitBody, err error) {
	rr := s.opts.Reranker
	switch {
	case rr == nil:
		return domain.RerankNotConfigured, nil, nil
	case !a.Rerank:
		return domain.RerankNotRequested, nil, nil
	case len(r.hits) == 0:
		return domain.RerankNoHits, nil, nil
	}
	top := r.hits[:min(len(r.hits), s.opts.RerankTopN)]
	if bodies, err = s.bodies(ctx, org, top, r.vec, nil); err != nil {
		return "", nil, err
	}
	docs := make([]string, len(top))
	for i, h := range top {
		docs[i] = rerankText(h, bodies[h.ID], a.Query)
	}
	sctx, span := tracer.Start(ctx, "rerank")
	defer span.End()
	span.SetAttributes(attrRerankModel.String(rr.Model()), attrRerankCandidates.Int(len(top)))
	start, deadline := time.Now(), began.Add(s.opts.RerankBudget)
	rctx, cancel := context.WithDeadline(sctx, deadline)
	var results []rerank.Result
	if time.Until(deadline) > 0 {
		results, err = rr.Rerank(rctx, a.Query, docs)
	} else {
		err = context.DeadlineExceeded // the ranking spent the budget
	}
	cancel()
	wait := time.Since(start)
	if err == nil && !complete(results, len(top)) {
		err = errors.New("the reranker did not score each candidate once")
	}
	outcome := rerankOK
	switch {
	case err == nil:
	case ctx.Err() != nil:
		span.SetStatus(codes.Error, "cancelled")
		return "", nil, ctx.Err() // the caller went away: no answer to give
	case errors.Is(err, rerank.ErrBreakerOpen):
		outcome = domain.RerankBreakerOpen
		s.log().Debug("knowledge: reranker's breaker open; fused order", "model", rr.Model())
	case errors.Is(rctx.Err(), context.DeadlineExceeded):
		outcome = domain.RerankTimeout
		s.log().Warn("knowledge: reranker over budget; fused order", "model", rr.Model(), "budget", s.opts.RerankBudget)
	default:
		outcome = domain.RerankError
		s.log().Warn("knowledge: rerank failed; fused order", "model", rr.Model(), "err", err)
	}
	span.SetAttributes(attrRerankOutcome.String(outcome))
	if outcome != rerankOK {
		span.SetStatus(codes.Error, outcome)
	}
	if s.opts.RerankObserver != nil {
		s.opts.RerankObserver.Reranked(rr.Model(), len(top), wait, outcome)
	}
	if outcome != rerankOK {
		return outcome, bodies, nil
	}
	scores := make([]float64, len(top))
	for _, x := range results {
		scores[x.Index] = x.Score
	}
	fused := make([]rank.Fused, len(r.hits))
	rows := make(map[uuid.UUID]*candidateRow, len(r.hits))
	for i, h := range r.hits {
		fused[i], rows[h.ID] = h.fusedHit, h.row
	}
	for i, h := range rank.Rerank(fused, scores, *s.opts.RerankCalibration) {
		r.hits[i] = rankedHit{fusedHit: h, row: rows[h.ID]}
	}
	return "", bodies, nil
}

// complete says whether results score each of n candidates once.
func complete(results []rerank.Result, n int) bool {
	if len(results) != n {
		return false
	}
	seen := make([]bool, n)
	for _, x := range results {
		if x.Index < 0 || x.Index >= n || seen[x.Index] {
			return false
		}
		seen[x.Index] = true
	}
	return true
}

// rerankText is what the reranker reads of a candidate: its title, a blank
// line and its best passage (snippet.Passage): the window of the body
// holding the most query words, or, for an entry only the vector list
// found, its chunk nearest the query.
func rerankText(h rankedHit, b hitBody, query string) string {
	q := query
	if h.FullTextRank == 0 && b.near.Start >= 0 {
		q = "" // found by meaning: its nearest chunk is the passage
	}
	return h.row.Title + "\n\n" + snippet.Passage(b.body, q, RerankPassageChars, b.near.Start, b.near.End)
}
