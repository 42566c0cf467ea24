package search

import (
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/rank"
)

// Ranking: three lists fused by evidence-weighted Reciprocal Rank Fusion
// (internal/rank says how, and docs/knowledge.md, "Ranking and scores",
// what an agent reads of it). What agents and apps read of the maths is
// here; the maths is there.
const (
	// RRFK is the k of RRF: a hit ranked r in a list contributes 1/(k+r).
	RRFK = rank.K

	// BM25K1 and BM25B are BM25's term-frequency saturation and length
	// normalisation (internal/rank).
	BM25K1 = rank.BM25K1
	BM25B  = rank.BM25B

	// DefaultMinScore is the minScore of a search that gives none: hits
	// with less evidence are not answered at all (internal/rank).
	DefaultMinScore = rank.DefaultMinScore

	// ScoreStrong and ScoreWeak are the bands of a score an agent reads
	// (docs/knowledge.md, "Ranking and scores"): at or above ScoreStrong a
	// hit answers the query; under ScoreWeak it shares only some words or
	// a vague likeness with it.
	ScoreStrong = rank.ScoreStrong
	ScoreWeak   = rank.ScoreWeak
)

// VectorCalibration maps a cosine similarity of the embedding model to
// evidence: Floor is what unrelated texts typically score (evidence 0; such
// hits leave the vector list), Full what a close paraphrase scores
// (evidence 1).
type VectorCalibration = rank.Calibration

// Candidate is one entry found by at least one list of a search, with its
// rank (0: not in that list) and raw signal in each list: what fusion is
// given, and what SearchLists shows of it (Lists.Candidates).
type Candidate = rank.Candidate

// QueryIDF is the query's idf mass per field (the sum of its kept terms'
// idf in the org), the denominators of the lexical evidence, and the org's
// indexed entries, which cap them.
type QueryIDF = rank.QueryIDF

// fusedHit is a candidate with its evidence and fused score.
type fusedHit = rank.Fused

// DefaultVectorCalibration is used for models without a measured
// calibration: a conservative middle for modern sentence-embedding models,
// whose unrelated pairs score 0.1-0.3 and close matches 0.6-0.9. Measure
// yours with apps/eval and set Config.VectorCalibration.
var DefaultVectorCalibration = VectorCalibration{Floor: 0.25, Full: 0.75}

// knownCalibrations are measured per model (docs/benchmarks.md).
var knownCalibrations = map[string]VectorCalibration{
	// The local hashing embedder: unrelated texts share trigrams by chance;
	// over NFCorpus (3,633 entries) the best chance cosine of 20 nonsense
	// queries was 0.21, and it grows slowly with the org (more chances).
	embed.LocalModel: {Floor: 0.25, Full: 0.65},
	// Universal Sentence Encoder lite, as ../shared/tools/embedserver
	// serves it (its default name; padding to 768 leaves cosines): over NFCorpus
	// the best cosine of 20 nonsense queries was 0.455; hand-written
	// paraphrases of operational notes score 0.40-0.88, median 0.73
	// (apps/eval --dups). Fusion is insensitive to it within 0.005 nDCG@10
	// from 0.25/0.75 to 0.50/0.80 (docs/benchmarks.md, "Why the fusion is
	// built so").
	"use-lite-v1-pad768": {Floor: 0.47, Full: 0.8},
}

// CalibrationFor returns the calibration of a model: a measured one if
// there is one, else DefaultVectorCalibration.
func CalibrationFor(model string) VectorCalibration {
	if c, ok := knownCalibrations[model]; ok {
		return c
	}
	return DefaultVectorCalibration
}

// RRFScore is the fused score of one hit at full evidence in every list
// it is in, given its 1-based rank in each list (0: not in that list).
func RRFScore(ranks ...int) float64 { return rank.RRFScore(ranks...) }
