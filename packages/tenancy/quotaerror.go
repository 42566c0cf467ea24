package tenancy

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/errs"
)

// quotaError is a quota that refused units of resource, worded with what
// the limit is and how much of it is used (read inside the refusing
// transaction, so the figures are the ones it saw), so that the refusal
// says what to ask an operator for. When they cannot be read, the refusal
// says less.
func quotaError(ctx context.Context, db DB, orgID uuid.UUID, resource string) error {
	qs, err := QuotasOn(ctx, db, orgID)
	if err == nil {
		for _, q := range qs {
			if q.Resource == resource && q.Limit != nil {
				return &errs.Error{Code: errs.CodeQuotaExceeded, Message: fmt.Sprintf(
					"the org has stored %d entries of its %s quota of %d; an operator can raise it (ctl quota set), or forget entries no longer needed", q.Used, resource, *q.Limit)}
			}
		}
	}
	return &errs.Error{Code: errs.CodeQuotaExceeded, Message: "the org has used its whole " + resource + " quota"}
}
