package main

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentfleet/orchestrator/packages/appenv"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestRunEmbedsServesMetricsAndStops runs the worker as main does: one
// entry stored and enqueued, one whose enqueue was lost; both become ready,
// /metrics shows it, and cancelling the context shuts down cleanly.
func TestRunEmbedsServesMetricsAndStops(t *testing.T) {
	t.Parallel()
	pg := testenv.Postgres(t)
	r := testenv.LeaseRedis(t)
	ctx := context.Background()
	agent := testfactory.Agent(ctx, t, pg.Pool, nil)
	insert := func(title string) knowledge.EmbeddingJob {
		e := testfactory.Entry(ctx, t, pg.Pool, &testfactory.EntryOpts{OrgID: agent.OrgID, AgentID: agent.ID, Title: title})
		return knowledge.EmbeddingJob{OrgID: e.OrgID, EntryID: e.ID, Generation: e.Generation}
	}
	stored, lost := insert("stored"), insert("lost")
	client := asynq.NewClient(asynq.RedisClientOpt{Addr: r.Options.Addr, DB: r.DB, Password: r.Options.Password})
	defer client.Close()
	if err := jobs.NewEnqueuer(client).EnqueueEmbedding(ctx, stored); err != nil {
		t.Fatal(err)
	}

	out := &testenv.Buffer{}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- run(runCtx, nil, envOf(map[string]string{
			"DATABASE_URL":              pg.URL,
			"REDIS_URL":                 r.URL,
			"WORKER_METRICS_ADDR":       "127.0.0.1:0",
			"LOG_FORMAT":                "text", // the assertions read key=value lines
			"WORKER_RECONCILE_INTERVAL": "200ms",
			"WORKER_RECONCILE_GRACE":    "300ms",
			"WORKER_BACKLOG_INTERVAL":   "100ms",
			"WORKER_SHUTDOWN_TIMEOUT":   "1s",
			"WORKER_INDEX_INTERVAL":     "50ms",
			"WORKER_UPKEEP_INTERVAL":    "1s",
			"SEARCH_TEXT_CONFIG":        "simple",
		}), out)
	}()
	defer func() {
		cancel()
		<-done
	}()

	deadline := time.Now().Add(20 * time.Second)
	for {
		var n int
		if err := pg.Pool.QueryRow(ctx, "SELECT count(*) FROM knowledge WHERE embedding_status = 'ready' AND embedding_model = 'local-hash-v1'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 2 entries ready; output:\n%s", n, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = lost

	// The indexer moved both entries into the lexical index, built with
	// SEARCH_TEXT_CONFIG.
	for {
		var queued int
		var config *string
		if err := pg.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM knowledge_index_queue),
			(SELECT config::text FROM knowledge_search_stats WHERE org_id = $1)`, agent.OrgID).Scan(&queued, &config); err != nil {
			t.Fatal(err)
		}
		if queued == 0 && config != nil {
			if *config != "simple" {
				t.Fatalf("org indexed with %q, want SEARCH_TEXT_CONFIG's simple", *config)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d entries still queued for the index; output:\n%s", queued, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	addr := regexp.MustCompile(`metrics=(http://\S+/metrics)`).FindStringSubmatch(out.String())
	if addr == nil {
		t.Fatalf("no metrics address in output:\n%s", out.String())
	}
	var body string
	for time.Now().Before(deadline) {
		resp, err := http.Get(addr[1])
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		if strings.Contains(body, `knowledge_embed_entries_total{result="ready"} 2`) &&
			strings.Contains(body, "knowledge_embed_pending_entries 0") &&
			strings.Contains(body, "knowledge_index_entries_total 2") &&
			strings.Contains(body, `knowledge_upkeep_passes_total{result="ok"}`) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, want := range []string{
		`knowledge_embed_entries_total{result="ready"} 2`,
		"knowledge_embed_pending_entries 0",
		"knowledge_embed_store_to_ready_seconds_count 2",
		"knowledge_embed_batch_size_count",
		`knowledge_embed_provider_seconds_count{result="ok"}`,
		`knowledge_embed_tasks_total{result="done",type="knowledge:embed_batch"}`,
		"knowledge_index_entries_total 2",
		`knowledge_index_passes_total{result="ok"}`,
		"knowledge_index_pass_seconds_count",
		"knowledge_index_last_success_timestamp_seconds",
		`knowledge_upkeep_passes_total{result="ok"}`,
		"knowledge_upkeep_pass_seconds_count",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
	// The lost entry was enqueued again by the reconciler: at least once
	// (on a loaded host its job may outlive the grace and be enqueued
	// twice; the second finds the entry ready and counts as stale).
	if !regexp.MustCompile(`(?m)^knowledge_embed_reconciler_requeued_total [1-9][0-9]*$`).MatchString(body) {
		t.Errorf("metrics lack knowledge_embed_reconciler_requeued_total >= 1:\n%s", body)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		done <- nil
	case <-time.After(15 * time.Second):
		t.Fatal("no graceful shutdown")
	}
	if !strings.Contains(out.String(), "worker stopped") {
		t.Fatalf("output:\n%s", out.String())
	}
}

// Every bad variable of the worker is named in one error: its own, the
// embedder's and the chunking's together.
func TestRunNamesEveryBadVariableAtOnce(t *testing.T) {
	t.Parallel()
	err := run(context.Background(), nil, envOf(map[string]string{"WORKER_CONCURRENCY": "lots", "EMBEDDER": "openai",
		"EMBEDDINGS_MODEL": "m", "EMBEDDINGS_DIMENSIONS": "9000", "EMBEDDINGS_CHUNK_OVERLAP": "30000"}), io.Discard)
	for _, want := range []string{`WORKER_CONCURRENCY="lots"`, `EMBEDDINGS_DIMENSIONS="9000"`, "EMBEDDINGS_CHUNK_OVERLAP"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want every bad variable named, %s among them", err, want)
		}
	}
}

func TestRunRefusesBadConfig(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		env  map[string]string
		args []string
		want string
	}{
		"concurrency":  {env: map[string]string{"WORKER_CONCURRENCY": "lots"}, want: "WORKER_CONCURRENCY"},
		"grace":        {env: map[string]string{"WORKER_BATCH_GRACE": "100ms"}, want: "WORKER_BATCH_GRACE"},
		"batch":        {env: map[string]string{"WORKER_BATCH_SIZE": "0"}, want: "WORKER_BATCH_SIZE"},
		"embedder":     {env: map[string]string{"EMBEDDER": "openai"}, want: "EMBEDDINGS_MODEL"},
		"dims":         {env: map[string]string{"EMBEDDER": "openai", "EMBEDDINGS_MODEL": "m", "EMBEDDINGS_DIMENSIONS": "4000"}, want: "EMBEDDINGS_DIMENSIONS"},
		"redis":        {env: map[string]string{"REDIS_URL": "http://nope"}, want: "REDIS_URL"},
		"args":         {args: []string{"--fast"}, want: "unexpected arguments"},
		"index":        {env: map[string]string{"WORKER_INDEX_INTERVAL": "1ms"}, want: "WORKER_INDEX_INTERVAL"},
		"index idle":   {env: map[string]string{"WORKER_INDEX_IDLE_INTERVAL": "1ms"}, want: "WORKER_INDEX_IDLE_INTERVAL"},
		"upkeep":       {env: map[string]string{"WORKER_UPKEEP_INTERVAL": "soon"}, want: "WORKER_UPKEEP_INTERVAL"},
		"index memory": {env: map[string]string{"WORKER_VECTOR_INDEX_MEMORY_MB": "4GB"}, want: "WORKER_VECTOR_INDEX_MEMORY_MB"},
		"retention":    {env: map[string]string{"AUDIT_RETENTION": "90 days"}, want: "AUDIT_RETENTION"},
		"short":        {env: map[string]string{"AUDIT_RETENTION": "10m"}, want: "AUDIT_RETENTION"},
		"prune":        {env: map[string]string{"AUDIT_PRUNE_INTERVAL": "1ms"}, want: "AUDIT_PRUNE_INTERVAL"},
		"chunk":        {env: map[string]string{"EMBEDDINGS_CHUNK_CHARS": "100"}, want: "EMBEDDINGS_CHUNK_CHARS"},
		"overlap":      {env: map[string]string{"EMBEDDINGS_CHUNK_CHARS": "1000", "EMBEDDINGS_CHUNK_OVERLAP": "600"}, want: "EMBEDDINGS_CHUNK_OVERLAP"},
	} {
		err := run(context.Background(), c.args, envOf(c.env), io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error naming %s", name, err, c.want)
		}
	}
}

// TestRunRefusesUnknownTextSearchConfig: a misspelt SEARCH_TEXT_CONFIG
// stops the worker at start, naming the variable; it would otherwise fail
// the indexing of every new org.
func TestRunRefusesUnknownTextSearchConfig(t *testing.T) {
	t.Parallel()
	pg := testenv.Postgres(t)
	r := testenv.LeaseRedis(t)
	err := run(context.Background(), nil, envOf(map[string]string{
		"DATABASE_URL":        pg.URL,
		"REDIS_URL":           r.URL,
		"WORKER_METRICS_ADDR": "127.0.0.1:0",
		"LOG_FORMAT":          "text", // the assertions read key=value lines
		"SEARCH_TEXT_CONFIG":  "englsh",
	}), io.Discard)
	if err == nil || !strings.Contains(err.Error(), `SEARCH_TEXT_CONFIG="englsh"`) {
		t.Fatalf("got %v, want an error naming SEARCH_TEXT_CONFIG", err)
	}
}

func TestAuditRetentionSetting(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]time.Duration{"": 90 * 24 * time.Hour, "30d": 30 * 24 * time.Hour, "36h": 36 * time.Hour} {
		e := appenv.New(envOf(map[string]string{"AUDIT_RETENTION": v}))
		if got := parseAuditConfig(e).retention; got != want || e.Err() != nil {
			t.Errorf("%q: %v, %v; want %v", v, got, e.Err(), want)
		}
	}
}

// TestRunRefusesEmbeddingsNoStoredVectorIsOf: vectors of one model are
// stored and the worker is configured with another model (or width): it
// stops at start, naming the setting and what is stored, unless
// EMBEDDINGS_ALLOW_MODEL_CHANGE says the change is meant.
func TestRunRefusesEmbeddingsNoStoredVectorIsOf(t *testing.T) {
	t.Parallel()
	pg := testenv.Postgres(t)
	r := testenv.LeaseRedis(t)
	testfactory.Entry(context.Background(), t, pg.Pool, &testfactory.EntryOpts{Title: "t", Body: "b",
		Embedding: slices.Repeat([]float32{0.1}, 768), Model: "local-hash-v1"})
	env := otherModelEnv(pg.URL, r.URL)
	err := run(context.Background(), nil, envOf(env), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "EMBEDDINGS_MODEL=all-minilm") ||
		!strings.Contains(err.Error(), "local-hash-v1 (768 dimensions) in 1 org(s)") ||
		!strings.Contains(err.Error(), "EMBEDDINGS_ALLOW_MODEL_CHANGE") {
		t.Fatalf("got %v, want an error naming EMBEDDINGS_MODEL and the stored model", err)
	}
	// Allowed: the worker starts (and stops when asked).
	env["EMBEDDINGS_ALLOW_MODEL_CHANGE"] = "true"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := run(ctx, nil, envOf(env), io.Discard); err != nil {
		t.Fatalf("with the change allowed: %v", err)
	}
}

// otherModelEnv configures the worker with a model (all-minilm, 384
// dimensions) other than the local embedder's, at a provider URL nothing
// answers on.
func otherModelEnv(databaseURL, redisURL string) map[string]string {
	return map[string]string{
		"DATABASE_URL":          databaseURL,
		"REDIS_URL":             redisURL,
		"WORKER_METRICS_ADDR":   "127.0.0.1:0",
		"EMBEDDER":              "openai",
		"EMBEDDINGS_MODEL":      "all-minilm",
		"EMBEDDINGS_DIMENSIONS": "384",
		"EMBEDDINGS_BASE_URL":   "http://127.0.0.1:1/v1",
	}
}
