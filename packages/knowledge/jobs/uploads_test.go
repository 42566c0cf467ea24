package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
)

// The worker deletes expired uploads in parts with their parts on its own
// loop, and leaves the others.
func TestWorkerDeletesExpiredUploads(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var expired, live string
	for i, at := range []string{"now() - interval '1 second'", "now() + interval '1 hour'"} {
		dst := []*string{&expired, &live}[i]
		if err := b.pool.QueryRow(ctx, `INSERT INTO knowledge_document_uploads (org_id, agent_id, title, total_bytes, received_bytes, next_index, expires_at)
			VALUES ($1, $2, 'doc', 10, 4, 1, `+at+`) RETURNING id::text`, b.org, b.agent).Scan(dst); err != nil {
			t.Fatal(err)
		}
		if _, err := b.pool.Exec(ctx, `INSERT INTO knowledge_document_upload_parts (org_id, upload_id, index, content, bytes, digest)
			VALUES ($1, $2, 0, 'abcd', 4, '\x00')`, b.org, *dst); err != nil {
			t.Fatal(err)
		}
	}
	b.worker(t, embed.NewLocal(), func(o *jobs.WorkerOptions) { o.UploadExpiryInterval = 50 * time.Millisecond })
	eventually(t, 20*time.Second, "the expired upload deleted", func() bool {
		return b.count(t, "SELECT count(*) FROM knowledge_document_uploads WHERE org_id = $1") == 1
	})
	var left string
	if err := b.pool.QueryRow(ctx, "SELECT id::text FROM knowledge_document_uploads").Scan(&left); err != nil || left != live {
		t.Fatalf("left upload %s (%v), want the live one %s", left, err, live)
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge_document_upload_parts WHERE org_id = $1"); n != 1 {
		t.Fatalf("%d parts left, want the live upload's 1", n)
	}
}
