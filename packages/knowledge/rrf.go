package knowledge

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
)

// Ranking: three lists fused by Reciprocal Rank Fusion (k = 60), each hit's
// contribution weighted by the evidence of the list that found it.
//
// Plain RRF scores a hit by its ranks alone: the best vector hit of a query
// that matches nothing still ranks first and scores the same as the best hit
// of a query that matches perfectly, so no threshold can tell them apart
// (issue 9: every vector-only hit scored ~0.33, relevant or not). Here each
// list also gives a calibrated evidence e in [0, 1] from its raw signal, and
//
//	score = sum over lists of e(list) * (k + 1) / (k + rank(list)) / 3
//
// With e = 1 everywhere this is RRF normalised to (0, 1]. The rank factor
// only decays slowly (rank 10: 0.87, rank 40: 0.61), so the score is mostly
// the evidence: how much of the query an entry answers, and how many lists
// agree. The evidence of each list:
//
//   - full text: BM25 / the query's idf mass (the sum of its terms' idf),
//     capped at 1. An entry holding every query term once, at the org's
//     average length, scores 1; one holding only the query's common words
//     scores little, whatever the org's size, because idf is relative to it.
//     A query word the org has never seen keeps its (high) idf in the mass:
//     a query about something the org does not know scores low everywhere.
//   - title: 1 when the title holds the whole query (ILIKE), else BM25 over
//     titles / the query's idf mass over titles, capped at 1.
//   - vector: (cosine - floor) / (full - floor), clamped to [0, 1], with the
//     floor and full points of the embedding model (VectorCalibration):
//     cosines at or below the floor are what unrelated texts score with that
//     model, so those hits leave the list altogether.
//
// A query with nothing relevant comes back empty because nothing gives
// evidence for it: no query word is in the org's index (or only stop
// words), and every vector hit is under the model's floor, so every score
// is 0 and no hit is answered. On top of that, hits below the caller's
// minScore, or DefaultMinScore when none is given, are dropped: a margin
// against hits with almost no evidence (a single common word). apps/eval
// measures both (docs/benchmarks.md: on NFCorpus no nonsense query finds
// anything even at minScore 0, and any gate up to 0.10 keeps every real
// query answered at the same precision).
const (
	// RRFK is the k of RRF: a hit ranked r in a list contributes 1/(k+r).
	RRFK = 60
	// fusedLists is how many lists are fused. Scores are divided by it so
	// they lie in [0, 1]; the divisor stays 3 when the vector list is
	// unavailable, so a score means the same thing in every answer.
	fusedLists = 3

	// BM25K1 and BM25B are BM25's term-frequency saturation and length
	// normalisation: Anserini's values for BEIR (and close to Lucene's
	// defaults, 1.2 and 0.75): short knowledge entries should not be
	// penalised much for length.
	BM25K1 = 0.9
	BM25B  = 0.4

	// DefaultMinScore is the minScore of a search that gives none: hits
	// with less evidence are not answered at all. On NFCorpus every gate
	// from 0 to 0.10 answers the same real queries at the same precision
	// (apps/eval); 0.05 is half of that safe range, a margin for collections
	// where single common words give weak partial matches.
	DefaultMinScore = 0.05
)

// VectorCalibration maps a cosine similarity of the embedding model to
// evidence: Floor is what unrelated texts typically score (evidence 0; such
// hits leave the vector list), Full what a close paraphrase scores
// (evidence 1).
type VectorCalibration struct {
	Floor float64
	Full  float64
}

// DefaultVectorCalibration is used for models without a measured
// calibration: a conservative middle for modern sentence-embedding models,
// whose unrelated pairs score 0.1-0.3 and close matches 0.6-0.9. Measure
// yours with apps/eval and set Options.VectorCalibration.
var DefaultVectorCalibration = VectorCalibration{Floor: 0.25, Full: 0.75}

// knownCalibrations are measured per model (docs/benchmarks.md).
var knownCalibrations = map[string]VectorCalibration{
	// The local hashing embedder: unrelated texts share trigrams by chance;
	// over NFCorpus (3,633 entries) the best chance cosine of 20 nonsense
	// queries was 0.21, and it grows slowly with the org (more chances).
	embed.LocalModel: {Floor: 0.25, Full: 0.65},
}

// CalibrationFor returns the calibration of a model: a measured one if
// there is one, else DefaultVectorCalibration.
func CalibrationFor(model string) VectorCalibration {
	if c, ok := knownCalibrations[model]; ok {
		return c
	}
	return DefaultVectorCalibration
}

func (c VectorCalibration) evidence(cosine float64) float64 {
	if c.Full <= c.Floor {
		return clamp01(cosine)
	}
	return clamp01((cosine - c.Floor) / (c.Full - c.Floor))
}

func clamp01(x float64) float64 {
	if math.IsNaN(x) {
		return 0
	}
	return math.Min(1, math.Max(0, x))
}

// RRFScore is the plain normalised RRF score of one hit given its 1-based
// rank in each list (0: not in that list): the fused score when every list
// has full evidence.
func RRFScore(ranks ...int) float64 {
	var sum float64
	for _, r := range ranks {
		if r > 0 {
			sum += rrfTerm(r)
		}
	}
	return sum / fusedLists
}

// rrfTerm is the contribution of rank r normalised so that rank 1 gives 1.
func rrfTerm(r int) float64 {
	return float64(RRFK+1) / float64(RRFK+r)
}

// candidate is one entry found by at least one list, with its raw signals.
type candidate struct {
	ID                                  uuid.UUID
	VectorRank, FullTextRank, TitleRank int
	Cosine, BM25, TitleBM25             float64
	TitleContains                       bool
}

// queryMass is the query's idf mass per field, the denominators of the
// lexical evidence.
type queryMass struct{ Body, Title float64 }

// fusedHit is a candidate with its evidence and fused score.
type fusedHit struct {
	candidate
	Score                      float64
	EVector, EFullText, ETitle float64
}

// fuse calibrates and fuses candidates, and returns those scoring at least
// minScore, best first (ties by id, so answers are stable). Vector hits
// below the model's floor leave the vector list; the ranks of the others do
// not change, as the list is ordered by cosine.
func fuse(cands []candidate, mass queryMass, cal VectorCalibration, minScore float64) []fusedHit {
	out := make([]fusedHit, 0, len(cands))
	for _, c := range cands {
		h := fusedHit{candidate: c}
		if c.VectorRank > 0 {
			h.EVector = cal.evidence(c.Cosine)
			if h.EVector == 0 {
				h.VectorRank = 0
			}
		}
		if c.FullTextRank > 0 && mass.Body > 0 {
			h.EFullText = clamp01(c.BM25 / mass.Body)
		}
		if c.TitleRank > 0 {
			if c.TitleContains {
				h.ETitle = 1
			} else if mass.Title > 0 {
				h.ETitle = clamp01(c.TitleBM25 / mass.Title)
			}
		}
		var sum float64
		if h.VectorRank > 0 {
			sum += h.EVector * rrfTerm(h.VectorRank)
		}
		if h.FullTextRank > 0 {
			sum += h.EFullText * rrfTerm(h.FullTextRank)
		}
		if h.TitleRank > 0 {
			sum += h.ETitle * rrfTerm(h.TitleRank)
		}
		h.Score = sum / fusedLists
		if h.Score <= 0 || h.Score < minScore {
			continue
		}
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b fusedHit) int { return bestFirst(a.Score, a.ID, b.Score, b.ID) })
	return out
}

// bestFirst orders two scored entries: the higher score first, ties by id,
// so an order never depends on the order rows arrived in. Fusion's order,
// and the similar list's (similar.go).
func bestFirst(aScore float64, aID uuid.UUID, bScore float64, bID uuid.UUID) int {
	if aScore != bScore {
		if aScore > bScore {
			return -1
		}
		return 1
	}
	return strings.Compare(aID.String(), bID.String())
}

// candidateCount is how many candidates each list brings to the fusion:
// four times the hits asked for, at least 40. Past a few times the limit a
// hit of one list can no longer beat hits several lists agree on, so deeper
// lists cost time and change nothing the caller sees. The floor keeps small
// limits from starving the fusion.
func candidateCount(limit int) int {
	return max(limit*4, 40)
}

// Environment variables of VectorCalibrationFromEnv.
const (
	EnvCosineFloor = "SEARCH_COSINE_FLOOR"
	EnvCosineFull  = "SEARCH_COSINE_FULL"
)

// VectorCalibrationFromEnv reads an operator's calibration of the
// embedding model (both variables, or neither: nil means CalibrationFor the
// model). Measure a model's floor as the best cosine nonsense queries reach
// in a real org (apps/eval prints it), and full as a close paraphrase's.
func VectorCalibrationFromEnv(getenv func(string) string) (*VectorCalibration, error) {
	floor, full := strings.TrimSpace(getenv(EnvCosineFloor)), strings.TrimSpace(getenv(EnvCosineFull))
	if floor == "" && full == "" {
		return nil, nil
	}
	var c VectorCalibration
	var err error
	if c.Floor, err = strconv.ParseFloat(floor, 64); err != nil || c.Floor < -1 || c.Floor >= 1 {
		return nil, fmt.Errorf("%s=%q: must be a cosine in [-1, 1), set together with %s", EnvCosineFloor, floor, EnvCosineFull)
	}
	if c.Full, err = strconv.ParseFloat(full, 64); err != nil || c.Full <= c.Floor || c.Full > 1 {
		return nil, fmt.Errorf("%s=%q: must be a cosine above %s and at most 1", EnvCosineFull, full, EnvCosineFloor)
	}
	return &c, nil
}
