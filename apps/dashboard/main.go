// Command dashboard serves the asynq dashboard (asynqmon) for operators:
// queues, batches in flight, retries and the archive of failed embedding
// tasks. It listens on loopback by default and requires HTTP basic
// credentials from the environment. See run.go and docs/embeddings.md.
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
		fmt.Fprintln(os.Stderr, "dashboard:", err)
		os.Exit(1)
	}
}
