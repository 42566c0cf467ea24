// Command ctl is the operator CLI of the knowledge module: migrations, orgs,
// agents, tokens, quotas, tasks and re-embedding. Every command takes --json
// for scripts. Run it as `go run ./apps/ctl ...` from the repository root.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
