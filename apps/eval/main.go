// Command eval measures the search quality of the real knowledge service on
// a BEIR-layout test collection: it loads the corpus into a fresh database
// through Service.Store, indexes and embeds it the way the product does,
// scores every ranked list (nDCG@10, recall, MRR) against the judgments,
// and times the agent-facing search. See run.go and docs/benchmarks.md.
//
//	go tool task eval -- DATASET_DIR [--json] [--keep] [--analyze] ...
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout)
	stop()
	var usage *usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.As(err, &usage):
		fmt.Fprintln(os.Stderr, "eval:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "eval:", err)
		os.Exit(1)
	}
}
