package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// With -worker each target's embeddings worker (apps/worker, of the same
// build as its server) runs beside the server while stores are timed, as
// a fleet runs them (`go tool task dev` starts both): every note stored is
// embedded, written to the vector index and indexed for full text while
// the next stores arrive, on the same two cores and the same database.
// Without it the stores meet an idle database, and the worker's share of
// a store's cost (its statements, their locks, the HNSW inserts) is left
// out; database.ready does that work afterwards, untimed, either way.
//
// The worker runs with the product's defaults, its upkeep included (a
// pass at start and every minute), so a database it ran on is no longer
// never analyzed: the first search state of a size stored with workers is
// named "worker-left" instead.

// With two targets, each worker runs only during its own server's calls
// (turn): the other is stopped (SIGSTOP) meanwhile, so a call meets its
// own build's background work and not the other's, which would make the
// two builds' figures alike whatever their workers cost. A worker's work
// for one store then runs beside the next store of its server, as it
// does on a machine of one fleet; a statement its backend is running when
// it stops still finishes beside the other's call.

// workerProc is one running worker.
type workerProc struct {
	cmd    *exec.Cmd
	log    string
	exited chan error // Wait's result
}

// workerReadyWithin bounds the wait for a worker's "worker started" line
// (its migrations check, the model's vector index, Redis).
const workerReadyWithin = 60 * time.Second

// startWorkers starts every target's worker for phase and waits until each
// says it started.
func (o *options) startWorkers(targets []*target, phase string) error {
	for _, t := range targets {
		if t.worker == "" {
			continue
		}
		if err := o.startWorker(t, phase); err != nil {
			return err
		}
	}
	return nil
}

// startWorker starts t's worker for phase, with the variables extra on top
// of its environment, and waits until it says it started.
func (o *options) startWorker(t *target, phase string, extra ...string) error {
	logPath := filepath.Join(o.dir, fmt.Sprintf("worker-%s-%s.log", t.name, phase))
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(t.worker)
	cmd.Env = append(o.workerEnv(t), extra...)
	cmd.Stdout, cmd.Stderr = logf, logf
	err = cmd.Start()
	logf.Close()
	if err != nil {
		return fmt.Errorf("%s worker: %w", t.name, err)
	}
	t.wproc = &workerProc{cmd: cmd, log: logPath, exited: make(chan error, 1)}
	go func(w *workerProc) { w.exited <- w.cmd.Wait() }(t.wproc)
	if err := t.wproc.awaitStart(); err != nil {
		return fmt.Errorf("%s worker: %w", t.name, err)
	}
	return nil
}

// workerEnv is t's worker's environment: the product's defaults on t's
// database (as its owner: the worker's upkeep needs it) and t's Redis,
// its metrics on a free port.
func (o *options) workerEnv(t *target) []string {
	return append(environWithout("WORKER_"), "DATABASE_URL="+t.db.ownerURL, "REDIS_URL="+t.lease.url, "WORKER_METRICS_ADDR=127.0.0.1:0")
}

// awaitStart waits for the worker's "worker started" line, or its exit.
func (w *workerProc) awaitStart() error {
	deadline := time.Now().Add(workerReadyWithin)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(w.log); err == nil && bytes.Contains(b, []byte("worker started")) {
			return nil
		}
		select {
		case err := <-w.exited:
			w.exited <- err // for stop
			return fmt.Errorf("exited before it started (%v; see %s)", err, w.log)
		case <-time.After(50 * time.Millisecond):
		}
	}
	w.cmd.Process.Kill()
	return fmt.Errorf("not started within %v (see %s)", workerReadyWithin, w.log)
}

// stopWorkers stops every target's worker (SIGTERM: running batches
// finish or go back on the queue, database.ready does what is left).
func stopWorkers(targets []*target) error {
	var errs []error
	for _, t := range targets {
		if t.wproc == nil {
			continue
		}
		if err := t.wproc.stop(); err != nil {
			errs = append(errs, fmt.Errorf("%s worker: %w (see %s)", t.name, err, t.wproc.log))
		}
		t.wproc = nil
	}
	return errors.Join(errs...)
}

// workerStopWithin bounds a worker's graceful stop (its
// WORKER_SHUTDOWN_TIMEOUT for running batches is shorter).
const workerStopWithin = 30 * time.Second

func (w *workerProc) stop() error {
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case err := <-w.exited:
		return err
	case <-time.After(workerStopWithin):
		w.cmd.Process.Kill()
		<-w.exited
		return fmt.Errorf("did not stop within %v of SIGTERM", workerStopWithin)
	}
}

// turn lets target j's worker run and stops the others' (one target's
// alone is never stopped).
func turn(targets []*target, j int) {
	if len(targets) < 2 {
		return
	}
	for k, t := range targets {
		if t.wproc == nil {
			continue
		}
		sig := syscall.SIGSTOP
		if k == j {
			sig = syscall.SIGCONT
		}
		t.wproc.cmd.Process.Signal(sig) // an exited worker is reported by stop
	}
}

// resumeWorkers lets every worker run again (after timeCalls, before
// SIGTERM: a stopped process would not act on it).
func resumeWorkers(targets []*target) {
	for _, t := range targets {
		if t.wproc != nil {
			t.wproc.cmd.Process.Signal(syscall.SIGCONT)
		}
	}
}
