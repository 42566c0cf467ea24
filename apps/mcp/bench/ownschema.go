package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/google/uuid"
)

// With -base-ctl the base's database is the base build's own, as that
// build shipped: its ctl makes it (`migrate up`: the base's migrations and
// roles; `dev bootstrap`: its org, agent and token) and its own worker
// makes its entries ready and keeps its tables (readyByWorker). Without
// it the base runs on this build's schema: the functions a statement
// calls (the duplicate check's key look-up, the vector functions, the
// triggers) are then this build's in both columns, and the comparison is
// of the two binaries' own work, not of the two builds.
//
// It takes -worker (each build's worker runs while its stores are timed):
// the base's entries are made ready by its worker, whose start runs an
// upkeep pass, so neither database is searched never analyzed; the first
// search state is what each build's worker left. And sizes up to
// -store-all: a larger org is bulk-stored once by this build's code into
// a template of this build's schema.

// createOwnDatabase makes database name with the base's ctl (ctl): its
// migrations, roles, and one org "bench" with agent "bench" and a token.
func createOwnDatabase(ctx context.Context, ownerBase, name, ctl string) (*database, error) {
	if err := createEmpty(ctx, ownerBase, name, nil); err != nil {
		return nil, err
	}
	d, err := newDatabase(ctx, ownerBase, name)
	if err != nil {
		return nil, err
	}
	// The owner's URL for both: bootstrap writes the org as an operator
	// would, and the owner may.
	env := append(environWithout("OWNER_DATABASE_URL"), "OWNER_DATABASE_URL="+d.ownerURL, "DATABASE_URL="+d.ownerURL)
	if _, err := runCtl(ctx, ctl, env, "migrate", "up"); err != nil {
		return nil, err
	}
	out, err := runCtl(ctx, ctl, env, "dev", "bootstrap", "--org-name", "bench", "--agent-name", "bench", "--ttl", "720h")
	if err != nil {
		return nil, err
	}
	if d.org, d.agent, d.token, err = parseBootstrap(out); err != nil {
		return nil, fmt.Errorf("%s dev bootstrap: %w", ctl, err)
	}
	return d, nil
}

// ctlWithin bounds one command of the base's ctl.
const ctlWithin = 5 * time.Minute

func runCtl(ctx context.Context, ctl string, env []string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, ctlWithin)
	defer cancel()
	cmd := exec.CommandContext(ctx, ctl, args...)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", ctl, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// parseBootstrap reads `ctl dev bootstrap`'s text answer: lines "org ID",
// "agent ID" and "token TOKEN".
func parseBootstrap(out []byte) (org, agent uuid.UUID, token string, err error) {
	got := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), " "); ok {
			got[k] = strings.TrimSpace(v)
		}
	}
	if org, err = uuid.Parse(got["org"]); err != nil {
		return uuid.Nil, uuid.Nil, "", fmt.Errorf("no org id in %q", out)
	}
	if agent, err = uuid.Parse(got["agent"]); err != nil {
		return uuid.Nil, uuid.Nil, "", fmt.Errorf("no agent id in %q", out)
	}
	if token = got["token"]; token == "" {
		return uuid.Nil, uuid.Nil, "", fmt.Errorf("no token in %q", out)
	}
	return org, agent, token, nil
}

// drainedWithin bounds the wait for a worker to embed and index every
// entry of its org.
const drainedWithin = 10 * time.Minute

// upkeepRuns is how long readyByWorker lets the worker run once its org
// is drained when asked for upkeep: passes every upkeepEvery, so a few
// whole passes after the last entry was indexed.
const (
	upkeepEvery = time.Second
	upkeepRuns  = 4 * time.Second
)

// readyByWorker runs t's own worker alone until every entry of its org is
// embedded and indexed, and with upkeep, its upkeep passes on what it
// left (WORKER_UPKEEP_INTERVAL of upkeepEvery, for upkeepRuns): the base's
// database.ready and database.upkeep, done by the base's code. It says
// how long it took.
func (o *options) readyByWorker(ctx context.Context, t *target, phase string, upkeep bool) (time.Duration, error) {
	start := time.Now()
	var extra []string
	if upkeep {
		extra = append(extra, "WORKER_UPKEEP_INTERVAL="+upkeepEvery.String())
	}
	if err := o.startWorker(t, phase, extra...); err != nil {
		return 0, err
	}
	err := t.db.awaitDrained(ctx)
	if err == nil && upkeep {
		time.Sleep(upkeepRuns)
	}
	return time.Since(start), errors.Join(err, stopWorkers([]*target{t}))
}

// awaitDrained waits until no entry of d's org is pending an embedding or
// queued for the full-text index.
func (d *database) awaitDrained(ctx context.Context) error {
	deadline := time.Now().Add(drainedWithin)
	for {
		var left int
		err := d.owner.QueryRow(ctx, `SELECT (SELECT count(*) FROM knowledge WHERE org_id = $1 AND embedding_status = 'pending')
     + (SELECT count(*) FROM knowledge_index_queue WHERE org_id = $1)`, d.org).Scan(&left)
		if err != nil {
			return err
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d entries not embedded or indexed within %v", left, drainedWithin)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
