package knowledge

import (
	"context"
	"errors"

	"github.com/google/uuid"
)

// IndexPending moves up to max not-yet-indexed entries of org into the
// org's inverted index and term statistics, and returns how many it moved.
func (s *Service) IndexPending(ctx context.Context, org uuid.UUID, max int) (int, error) {
	return 0, errors.New("not implemented yet")
}

// IndexAll indexes every pending entry of every org, batch by batch, until
// none is left (or ctx ends), and returns how many it indexed.
func (s *Service) IndexAll(ctx context.Context) (int, error) {
	return 0, errors.New("not implemented yet")
}
