package knowledge

// Reciprocal Rank Fusion, mirrored from the SQL of SearchHybrid
// (queries/search.sql), so the arithmetic is tested in Go and the SQL is
// checked against it.
const (
	// RRFK is the k of RRF: a hit ranked r in a list contributes 1/(k+r).
	RRFK = 60
	// fusedLists is how many lists are fused. The best possible sum is a
	// hit ranked first in all of them, 3/(k+1); scores are divided by it so
	// they lie in (0, 1]. The divisor stays 3/(k+1) when the vector list is
	// unavailable, so a score means the same in every answer (a hit found
	// by words only scores at most 2/3).
	fusedLists = 3
)

// RRFScore is the normalised fused score of one hit given its 1-based rank
// in each list (0: not in that list).
func RRFScore(ranks ...int) float64 {
	var sum float64
	for _, r := range ranks {
		if r > 0 {
			sum += 1.0 / float64(RRFK+r)
		}
	}
	return sum / (float64(fusedLists) / float64(RRFK+1))
}

// candidateCount is how many candidates each list brings to the fusion:
// four times the hits asked for, at least 40. A hit of rank c in one list
// scores 1/(60+c); past a few times the limit such a hit can no longer beat
// hits present in two lists, so deeper lists cost time and change nothing
// the caller sees. The floor keeps small limits from starving the fusion.
func candidateCount(limit int) int {
	return max(limit*4, 40)
}
