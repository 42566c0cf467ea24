package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentfleet/orchestrator/packages/appenv/knowledgeenv"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// TestRunStartsWhenTheStoredModelsCannotBeRead: the stored vectors'
// models cannot be read at start (here the table locked; on a cluster a
// worker down): the worker starts anyway, since the orgs it can reach
// are served, and checks again until the read answers; the refusal
// found then (another model is stored) stops it, naming the setting, as
// it would have at start.
//
// Not parallel: it shortens the check's deadline and pause for the
// package, and parallel tests run only after it has put them back.
func TestRunStartsWhenTheStoredModelsCannotBeRead(t *testing.T) {
	testenv.SkipOnCluster(t, "a lock on the coordinator's table does not hold the read of the shards; a worker down is TestClusterWorkerStopped's")
	timeout, every := knowledgeenv.SpaceCheckTimeout, knowledgeenv.SpaceRecheckEvery
	knowledgeenv.SpaceCheckTimeout, knowledgeenv.SpaceRecheckEvery = 300*time.Millisecond, 200*time.Millisecond
	t.Cleanup(func() { knowledgeenv.SpaceCheckTimeout, knowledgeenv.SpaceRecheckEvery = timeout, every })

	ctx := context.Background()
	pg := testenv.Postgres(t)
	r := testenv.LeaseRedis(t)
	testfactory.Entry(ctx, t, pg.Pool, &testfactory.EntryOpts{Title: "t", Body: "b",
		Embedding: slices.Repeat([]float32{0.1}, 768), Model: "local-hash-v1"})
	lock, err := pg.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(ctx)
	if _, err := lock.Exec(ctx, "LOCK TABLE knowledge IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}

	env := otherModelEnv(pg.URL, r.URL)
	var out testenv.Buffer
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run(rctx, nil, envOf(env), &out) }()

	// Started while the read cannot answer, and still running.
	for !strings.Contains(out.String(), "worker started") {
		select {
		case err := <-done:
			t.Fatalf("the worker stopped while the stored models could not be read: %v\n%s", err, out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if !strings.Contains(out.String(), "starting without the embedding-space check") {
		t.Fatalf("the start does not say the check was put off:\n%s", out.String())
	}
	select {
	case err := <-done:
		t.Fatalf("the worker stopped while the read still could not answer: %v", err)
	case <-time.After(3 * knowledgeenv.SpaceRecheckEvery):
	}

	// The read answers: the check refuses, and the worker stops with it.
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "EMBEDDINGS_MODEL=all-minilm") ||
			!strings.Contains(err.Error(), "local-hash-v1 (768 dimensions) in 1 org(s)") {
			t.Fatalf("got %v, want the refusal naming EMBEDDINGS_MODEL and the stored model", err)
		}
	case <-rctx.Done():
		t.Fatalf("the worker did not stop once the check could refuse:\n%s", out.String())
	}
}
