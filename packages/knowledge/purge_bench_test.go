package knowledge_test

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// BenchmarkPurge measures ctl purge's domain part in an indexed org of
// KNOWLEDGE_PURGE_BENCH_SIZE entries (default 20000; ~600-character bodies
// sharing common words, so common terms have long posting lists): one entry,
// then an agent's 500 entries (one batch).
func BenchmarkPurge(b *testing.B) {
	n := 20000
	if v := os.Getenv("KNOWLEDGE_PURGE_BENCH_SIZE"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatalf("KNOWLEDGE_PURGE_BENCH_SIZE: %v", err)
		}
	}
	for range b.N {
		bd := setup(b)
		if _, err := bd.pool.Exec(bd.ctx, `INSERT INTO knowledge (org_id, title, body, tags, created_by_agent_id)
			SELECT $1, 'entry ' || i, repeat(md5(i::text) || ' lorem ipsum dolor sit amet consectetur ' || (i % 1000) || ' ', 12), ARRAY['ops'],
			       CASE WHEN i % (greatest($4::int / 500, 1)) = 0 THEN $3::uuid ELSE $2::uuid END
			FROM generate_series(1, $4::int) i`, bd.org, bd.alice.AgentID, bd.bob.AgentID, n); err != nil {
			b.Fatal(err)
		}
		if _, err := maint(bd.ops).IndexAll(bd.ctx); err != nil {
			b.Fatal(err)
		}
		var one uuid.UUID
		if err := bd.pool.QueryRow(bd.ctx, "SELECT id FROM knowledge WHERE org_id = $1 AND created_by_agent_id = $2 LIMIT 1", bd.org, bd.alice.AgentID).Scan(&one); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if rep, err := bd.ops.Operations().Purge(bd.ctx, bd.org, knowledge.PurgeScope{Entry: one}, false); err != nil || rep.Entries != 1 {
			b.Fatalf("purge one: %+v %v", rep, err)
		}
		b.ReportMetric(float64(time.Since(t0).Microseconds())/1000, "one-entry-ms")
		t1 := time.Now()
		rep, err := bd.ops.Operations().Purge(bd.ctx, bd.org, knowledge.PurgeScope{Agent: bd.bob.AgentID}, false)
		if err != nil || rep.Entries < 400 {
			b.Fatalf("purge agent: %+v %v", rep, err)
		}
		secs := time.Since(t1).Seconds()
		b.ReportMetric(secs*1000, "agent-ms")
		b.ReportMetric(float64(rep.Entries)/secs, "agent-entries/s")
	}
}
