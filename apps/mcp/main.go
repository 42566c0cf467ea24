// Command mcp is the MCP server of the knowledge module: agents store,
// search and supersede knowledge through it, over Streamable HTTP at /mcp
// (default) or over stdio (--stdio). See docs/mcp.md.
//
// main only turns signals into a cancelled context and an error into an exit
// code; the wiring is in run, which the tests call.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	if err != nil {
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "mcp:", err)
		os.Exit(1)
	}
}
