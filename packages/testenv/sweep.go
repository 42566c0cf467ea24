package testenv

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// A test database is dropped when its test ends, or when its binary ends
// (Main); a binary that is killed (a developer's Ctrl-C, a timeout's
// panic, CI cancelled) drops nothing, and its databases would stay on the
// server for good. So a test database is named after its owner, the slot's
// connection that drops it (its backend's pid and start time, which no
// later backend has both of), and each binary sweeps, once, the test
// databases whose owner is gone: their binary died before dropping them.

// testDBPrefix begins the name of every test database this code makes.
const testDBPrefix = "knowledge_test_"

// backendStart is a backend's start in pg_stat_activity as a database's
// name holds it (µs since the epoch): what ownerTag writes, orphans reads.
const backendStart = "(extract(epoch FROM backend_start) * 1000000)::bigint"

// ownerTag is the part of a test database's name that names its owner, the
// slot's connection c: "<pid>_<backend start, µs since the epoch, hex>".
func ownerTag(ctx context.Context, c *pgx.Conn) (string, error) {
	var pid int
	var start int64
	err := c.QueryRow(ctx, "SELECT pid, "+backendStart+" FROM pg_stat_activity WHERE pid = pg_backend_pid()").Scan(&pid, &start)
	if err != nil {
		return "", fmt.Errorf("testenv: read the slot connection's backend: %w", err)
	}
	return strconv.Itoa(pid) + "_" + strconv.FormatInt(start, 16), nil
}

// ownerOf parses the owner out of a test database's name made by
// createDatabase; ok is false for any other name (an older scheme's, or
// not a test database's), which the sweep leaves alone.
func ownerOf(name string) (pid int, start int64, ok bool) {
	rest, found := strings.CutPrefix(name, testDBPrefix)
	if !found {
		return 0, 0, false
	}
	parts := strings.Split(rest, "_")
	if len(parts) != 3 {
		return 0, 0, false
	}
	pid, err := strconv.Atoi(parts[0])
	if err != nil {
		return 0, 0, false
	}
	start, err = strconv.ParseInt(parts[1], 16, 64)
	if err != nil {
		return 0, 0, false
	}
	return pid, start, true
}

var sweepOnce sync.Once

// sweepOrphans drops, once per binary and in the background (Main waits
// for it as for the drops), the test databases whose owner's backend is
// gone; only under Main, never in cluster mode (a database there is one
// on every node).
func sweepOrphans() {
	if !backgroundDrops.Load() || IsCluster() {
		return
	}
	sweepOnce.Do(func() {
		drops.Add(1)
		go func() {
			defer drops.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := sweep(ctx); err != nil {
				fmt.Fprintf(os.Stderr, "testenv: sweeping the databases of killed test runs: %v\n", err)
			}
		}()
	})
}

// sweep drops the test databases whose owner's backend is gone.
func sweep(ctx context.Context) error {
	admin, err := adminConn(ctx)
	if err != nil {
		return err
	}
	defer admin.Close(context.Background())
	orphans, err := orphans(ctx, admin)
	if err != nil {
		return err
	}
	for _, name := range orphans {
		if err := dropDatabase(ctx, admin, name); err != nil {
			return fmt.Errorf("drop %s: %w", name, err)
		}
	}
	return nil
}

// orphans lists the test databases whose owner's backend is gone.
func orphans(ctx context.Context, admin *pgx.Conn) ([]string, error) {
	rows, err := admin.Query(ctx, "SELECT datname FROM pg_database WHERE starts_with(datname, $1) AND NOT datistemplate", testDBPrefix)
	if err != nil {
		return nil, err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	rows, err = admin.Query(ctx, "SELECT pid, "+backendStart+" FROM pg_stat_activity WHERE backend_start IS NOT NULL")
	if err != nil {
		return nil, err
	}
	type backend struct {
		pid   int
		start int64
	}
	live := map[backend]bool{}
	for rows.Next() {
		var b backend
		if err := rows.Scan(&b.pid, &b.start); err != nil {
			return nil, err
		}
		live[b] = true
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var out []string
	for _, n := range names {
		if pid, start, ok := ownerOf(n); ok && !live[backend{pid, start}] {
			out = append(out, n)
		}
	}
	return out, nil
}
