package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// TestRunSwitchesModels: with EMBEDDINGS_NEXT_MODEL set, the worker
// backfills the next model's vectors (through its HTTP provider) and cuts
// the org over once it is covered.
func TestRunSwitchesModels(t *testing.T) {
	t.Parallel()
	pg := testenv.Postgres(t)
	r := testenv.LeaseRedis(t)
	ctx := context.Background()
	// Two entries with vectors of the current (local) model.
	org := testfactory.Org(ctx, t, pg.Pool, nil).ID
	for g := 1; g <= 2; g++ {
		testfactory.Entry(ctx, t, pg.Pool, &testfactory.EntryOpts{OrgID: org, Title: fmt.Sprintf("title %d", g),
			Body: strings.Repeat("body ", 1000), Embedding: slices.Repeat([]float32{0.1}, 768), Model: "local-hash-v1"})
	}
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var in struct{ Input []string }
		json.NewDecoder(req.Body).Decode(&in)
		type item struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		var out struct {
			Data []item `json:"data"`
		}
		for i := range in.Input {
			v := make([]float32, 256)
			v[i%256] = 1
			out.Data = append(out.Data, item{i, v})
		}
		json.NewEncoder(w).Encode(out)
	}))
	defer provider.Close()
	out := &testenv.Buffer{}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- run(runCtx, nil, envOf(map[string]string{
			"DATABASE_URL":               pg.URL,
			"REDIS_URL":                  r.URL,
			"WORKER_METRICS_ADDR":        "127.0.0.1:0",
			"LOG_FORMAT":                 "text",
			"WORKER_SHUTDOWN_TIMEOUT":    "1s",
			"EMBEDDINGS_NEXT_MODEL":      "next-256",
			"EMBEDDINGS_NEXT_DIMENSIONS": "256",
			"EMBEDDINGS_NEXT_BASE_URL":   provider.URL + "/v1",
			"WORKER_BACKFILL_INTERVAL":   "100ms",
		}), out)
	}()
	defer func() {
		cancel()
		<-done
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var cut bool
		var chunks int
		if err := pg.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM knowledge_org_spaces WHERE org_id = $1 AND model = 'next-256' AND dims = 256),
			(SELECT count(*) FROM knowledge_chunks WHERE embedding_model = 'next-256' AND chunk = 0)`, org).Scan(&cut, &chunks); err != nil {
			t.Fatal(err)
		}
		if cut {
			if chunks != 2 {
				t.Fatalf("cut over with %d of 2 entries backfilled", chunks)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not cut over (%d entries backfilled); output:\n%s", chunks, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The pass logs once it has ended, which is after it cut the org over:
	// wait for the line.
	for !strings.Contains(out.String(), "model switch: backfill pass") {
		if time.Now().After(deadline) {
			t.Fatalf("no backfill log line:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The pass is a task of its own queue, kept with its result: what the
	// dashboard shows (Completed, the result's JSON).
	insp := asynq.NewInspector(asynq.RedisClientOpt{Addr: r.Options.Addr, DB: r.DB})
	defer insp.Close()
	var res jobs.SwitchPassResult
	for {
		tasks, err := insp.ListCompletedTasks(jobs.SwitchQueue)
		if err != nil && !errors.Is(err, asynq.ErrQueueNotFound) {
			t.Fatal(err)
		}
		found := false
		for _, tk := range tasks {
			if tk.Type != jobs.TypeSwitchBackfill {
				t.Fatalf("task %s on the switch queue", tk.Type)
			}
			if err := json.Unmarshal(tk.Result, &res); err != nil {
				t.Fatalf("result %q: %v", tk.Result, err)
			}
			if res.Embedded > 0 {
				found = true
				break
			}
		}
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no completed pass that embedded entries on %s (%d tasks)", jobs.SwitchQueue, len(tasks))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if res.NextModel != "next-256" || res.Embedded != 2 || len(res.Coverage) != 1 || res.Coverage[0].Covered != 2 {
		t.Fatalf("pass result: %+v", res)
	}
}
