package maintenance

import (
	"context"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
)

// uploadExpiryBatch bounds one statement of the expiry pass.
const uploadExpiryBatch = 500

// DeleteExpiredUploads deletes every upload (of every org) past its expiry
// (UploadTTL after its start, last append or finish), with its staged
// parts, in batches, until none is left or ctx ends. It returns how many
// it deleted. The worker runs it periodically (jobs.Worker); an expired
// upload is already not found by the agents' calls, so when it runs only
// decides how long expired parts take room in the database.
func (m *Maintenance) DeleteExpiredUploads(ctx context.Context) (_ int64, err error) {
	defer data.WrapOp(&err, "knowledge.DeleteExpiredUploads")
	var total int64
	for {
		rows, err := m.q.ExpiredUploads(ctx, sqlc.ExpiredUploadsParams{Now: m.now(), MaxRows: uploadExpiryBatch})
		if err != nil {
			return total, err
		}
		byOrg := map[uuid.UUID][]uuid.UUID{}
		for _, r := range rows {
			byOrg[r.OrgID] = append(byOrg[r.OrgID], r.ID)
		}
		for org, ids := range byOrg {
			n, err := m.q.DeleteUploads(data.AsOrg(ctx, org), sqlc.DeleteUploadsParams{OrgID: org, Ids: ids})
			if err != nil {
				return total, err
			}
			total += n
		}
		if len(rows) < uploadExpiryBatch {
			return total, nil
		}
	}
}
