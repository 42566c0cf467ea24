package tenancy

import (
	"context"
	"fmt"

	"github.com/google/uuid"
)

// QuotaError is a quota that refused units: what the limit is and how much
// of it is used, so that the refusal says what to ask an operator for. It
// wraps ErrQuotaExceeded.
type QuotaError struct {
	Resource string
	Limit    int64 // the org's limit
	Used     int64 // units used when the call was refused
	Asked    int64 // units the call needed
}

func (e *QuotaError) Error() string {
	return fmt.Sprintf("%s: %d of the limit of %d used, %d more do not fit: %v", e.Resource, e.Used, e.Limit, e.Asked, ErrQuotaExceeded)
}

func (e *QuotaError) Unwrap() error { return ErrQuotaExceeded }

// quotaError reads the quota that refused n units of resource (inside the
// refusing transaction, so the figures are the ones it saw). When they
// cannot be read, the refusal is still ErrQuotaExceeded.
func quotaError(ctx context.Context, db DB, orgID uuid.UUID, resource string, n int64) error {
	qs, err := QuotasOn(ctx, db, orgID)
	if err == nil {
		for _, q := range qs {
			if q.Resource == resource && q.Limit != nil {
				return &QuotaError{Resource: resource, Limit: *q.Limit, Used: q.Used, Asked: n}
			}
		}
	}
	return fmt.Errorf("%s: %d more do not fit: %w", resource, n, ErrQuotaExceeded)
}
