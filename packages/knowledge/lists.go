package knowledge

import (
	"context"
	"errors"

	"github.com/google/uuid"
)

// ListHit is one entry of one ranked list: its id and the list's own
// signal for it (cosine similarity for the vector list, BM25 for the full
// text and title lists, the calibrated fused score for the fused list).
type ListHit struct {
	ID    uuid.UUID `json:"id"`
	Score float64   `json:"score"`
}

// Lists is the inside of one search: each list's ranking, as deep as asked,
// and the fused ranking built from them exactly as Search builds it (the
// same calibration and the same relevance gate), but not cut at the limit.
// It exists for evaluation (apps/eval) and for operators explaining a
// ranking; agents use Search.
type Lists struct {
	Fused    []ListHit `json:"fused"`
	Vector   []ListHit `json:"vector"`
	FullText []ListHit `json:"fullText"`
	Title    []ListHit `json:"title"`
	// VectorSearch is false when the query could not be embedded.
	VectorSearch bool `json:"vectorSearch"`
}

// SearchLists runs the search of in (its Limit is ignored) with each list
// taken depth deep (1..1000) and returns every list and the fusion.
func (s *Service) SearchLists(ctx context.Context, c Caller, in SearchInput, depth int) (*Lists, error) {
	return nil, errors.New("not implemented yet")
}
