package search

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"
)

// TestTableDocsCountThatFailsKeepsSearching: the count of every org's
// entries reads every Citus worker; one down must not fail the search of
// an org on another, nor one that hangs hold the others. A failed count
// keeps the last one read (before any, a table so large that the exact
// scan is chosen), is not tried again at once, a count under way does not
// hold the other callers, and only an ended context fails the caller that
// counts.
func TestTableDocsCountThatFailsKeepsSearching(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	down := errors.New("failed to connect to 127.0.0.1:5442")
	calls := 0
	failing := func(context.Context) (int64, error) { calls++; return 0, down }
	ctx := context.Background()

	var c tableDocsCache
	n, err := c.get(ctx, failing, log)
	if err != nil || n != unknownTableDocs {
		t.Fatalf("before any count: %d, %v; want %d, nil", n, err, unknownTableDocs)
	}
	if n, err := c.get(ctx, failing, log); err != nil || n != unknownTableDocs || calls != 1 {
		t.Fatalf("at once again: %d, %v after %d counts; want %d, nil after 1", n, err, calls, unknownTableDocs)
	}
	c.read = time.Now().Add(-tableDocsTTL) // the retry is due
	if n, err := c.get(ctx, func(context.Context) (int64, error) { return 42, nil }, log); err != nil || n != 42 {
		t.Fatalf("the worker back: %d, %v; want 42", n, err)
	}
	c.read = time.Now().Add(-tableDocsTTL) // the count is due again, and fails
	if n, err := c.get(ctx, failing, log); err != nil || n != 42 {
		t.Fatalf("after a count: %d, %v; want the last one, 42", n, err)
	}
	c.read = time.Now().Add(-tableDocsTTL) // due again; this count hangs
	release := make(chan struct{})
	started := make(chan struct{})
	done := make(chan int64)
	go func() {
		n, _ := c.get(ctx, func(context.Context) (int64, error) { close(started); <-release; return 43, nil }, log)
		done <- n
	}()
	<-started
	if n, err := c.get(ctx, failing, log); err != nil || n != 42 || calls != 2 {
		t.Fatalf("while a count hangs: %d, %v after %d failed counts; want 42 at once, no count", n, err, calls)
	}
	close(release)
	if n := <-done; n != 43 {
		t.Fatalf("the count that hung: %d, want 43", n)
	}
	c.read = time.Now().Add(-tableDocsTTL)
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.get(ended, func(ctx context.Context) (int64, error) { return 0, ctx.Err() }, log); !errors.Is(err, context.Canceled) {
		t.Fatalf("an ended context: %v, want its error", err)
	}
}
