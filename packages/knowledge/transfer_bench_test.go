package knowledge_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// peakHeap samples the Go heap in use every 5 ms while f runs and returns
// the highest value: what "constant memory" has to show.
func peakHeap(f func()) uint64 {
	runtime.GC()
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	f()
	close(stop)
	wg.Wait()
	return peak.Load()
}

// BenchmarkExportImport measures ctl export and import through the Service:
// entries per second and the peak Go heap, for an org of
// KNOWLEDGE_TRANSFER_BENCH_SIZE entries (default 20000; ~600-character
// bodies, three tags, chains of two, every entry with a random 768-dimension vector: identical vectors make HNSW
// inserts pathological),
// without and with --vectors. The file goes to disk, as in production.
func BenchmarkExportImport(b *testing.B) {
	n := 20000
	if v := os.Getenv("KNOWLEDGE_TRANSFER_BENCH_SIZE"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatalf("KNOWLEDGE_TRANSFER_BENCH_SIZE: %v", err)
		}
	}
	ctx := context.Background()
	db := testenv.Postgres(b)
	a := testfactory.Agent(ctx, b, db.Pool, nil)
	org, agent := a.OrgID, a.ID
	start := time.Now()
	if _, err := db.Pool.Exec(ctx, `
		INSERT INTO knowledge (org_id, title, body, tags, created_by_agent_id, embedding, embedding_status, embedding_model, embedded_at, created_at)
		SELECT $1, 'entry ' || i, repeat(md5(i::text) || ' lorem ipsum dolor sit amet ', 12), ARRAY['tag-' || (i % 50), 'ops', 'db'], $2,
		       (SELECT array_agg(random() - 0.5) FROM generate_series(1, 768) d WHERE d > i * 0)::vector, 'ready', 'local-hash-v1', now(),
		       now() - (i || ' seconds')::interval
		FROM generate_series(1, $3::int) i`, org, agent, n); err != nil {
		b.Fatal(err)
	}
	// Chains of two: every even entry superseded by the next one.
	if _, err := db.Pool.Exec(ctx, `
		WITH r AS (SELECT id, row_number() OVER (ORDER BY created_at, id) AS rn FROM knowledge WHERE org_id = $1),
		     p AS (SELECT a.id AS old, b.id AS new FROM r a JOIN r b ON b.rn = a.rn + 1 WHERE a.rn % 2 = 1)
		UPDATE knowledge k SET superseded_by = p.new, head_id = p.new, superseded_at = now() FROM p WHERE k.org_id = $1 AND k.id = p.old`, org); err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded %d entries in %s", n, time.Since(start).Round(time.Millisecond))
	svc := knowledge.New(db.Pool, knowledge.Options{})
	dir := b.TempDir()
	for _, vectors := range []bool{false, true} {
		name := "plain"
		if vectors {
			name = "vectors"
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				file := filepath.Join(dir, name+".jsonl")
				f, err := os.Create(file)
				if err != nil {
					b.Fatal(err)
				}
				var rep *knowledge.ExportReport
				t0 := time.Now()
				peak := peakHeap(func() {
					rep, err = svc.Operations().Export(ctx, org, f, knowledge.ExportOptions{Vectors: vectors})
				})
				exportSecs := time.Since(t0).Seconds()
				f.Close()
				if err != nil || rep.Entries != int64(n) {
					b.Fatalf("export: %+v %v", rep, err)
				}
				st, _ := os.Stat(file)
				org2 := testfactory.Org(ctx, b, db.Pool, nil).ID
				var irep *knowledge.ImportReport
				t1 := time.Now()
				ipeak := peakHeap(func() {
					irep, err = svc.Operations().Import(ctx, org2, func() (io.ReadCloser, error) { return os.Open(file) }, knowledge.ImportOptions{})
				})
				importSecs := time.Since(t1).Seconds()
				if err != nil || irep.Entries != int64(n) {
					b.Fatalf("import: %+v %v", irep, err)
				}
				b.ReportMetric(float64(n)/exportSecs, "export-entries/s")
				b.ReportMetric(float64(peak)/(1<<20), "export-peak-heap-MiB")
				b.ReportMetric(float64(n)/importSecs, "import-entries/s")
				b.ReportMetric(float64(ipeak)/(1<<20), "import-peak-heap-MiB")
				b.ReportMetric(float64(st.Size())/(1<<20), "file-MiB")
			}
		})
	}
}
