// Command worker runs the module's background work: the embeddings
// pipeline (the asynq server on the "embeddings" queue, with group
// aggregation into batches, one provider call per batch, and the reconciler
// that re-enqueues lost jobs), the lexical indexer that moves stored entries
// into the BM25 index, the table upkeep (VACUUM/ANALYZE) search depends on,
// and a Prometheus /metrics endpoint. Configuration is the environment; see
// run.go and docs/embeddings.md.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}
