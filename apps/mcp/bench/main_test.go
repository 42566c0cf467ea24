package main

import (
	"slices"
	"strings"
	"testing"
)

// TestParseWorkerFlags: a base compared with workers brings its own
// worker, and -base-worker means nothing without -worker and -base.
func TestParseWorkerFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // in the error; "" for none
	}{
		{[]string{"-worker"}, ""},
		{[]string{"-worker", "-base", "/b/mcp", "-base-worker", "/b/worker"}, ""},
		{[]string{"-worker", "-base", "/b/mcp"}, "-base-worker"},
		{[]string{"-base", "/b/mcp", "-base-worker", "/b/worker"}, "goes with -worker"},
		{[]string{"-worker", "-base-worker", "/b/worker"}, "goes with -worker and -base"},
	} {
		o, err := parse(c.args)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v", c.args, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v: error %v, want one naming %q", c.args, err, c.want)
		case c.want == "" && !o.worker:
			t.Errorf("%v: -worker not set", c.args)
		}
	}
}

// TestParseBaseIndexVersions: -base-index-versions is of a base.
func TestParseBaseIndexVersions(t *testing.T) {
	if _, err := parse([]string{"-base-index-versions"}); err == nil || !strings.Contains(err.Error(), "goes with -base") {
		t.Errorf("without -base: %v", err)
	}
	if o, err := parse([]string{"-base", "/b/mcp", "-base-index-versions"}); err != nil || !o.baseVersions {
		t.Errorf("with -base: %v", err)
	}
}

// TestEnvironWithout: a benchmarked process never inherits the harness's
// database, Redis, exporter or the variables named, and keeps the rest.
func TestEnvironWithout(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://elsewhere")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector")
	t.Setenv("WORKER_BATCH_SIZE", "7")
	t.Setenv("WORKERS_ELSEWHERE", "kept")
	t.Setenv("EMBEDDER", "local")
	env := environWithout("WORKER_")
	for _, kv := range env {
		for _, gone := range []string{"DATABASE_URL=", "OTEL_EXPORTER_OTLP_ENDPOINT=", "WORKER_BATCH_SIZE="} {
			if strings.HasPrefix(kv, gone) {
				t.Errorf("%s inherited", kv)
			}
		}
	}
	for _, kept := range []string{"WORKERS_ELSEWHERE=kept", "EMBEDDER=local"} {
		if !slices.Contains(env, kept) {
			t.Errorf("%s not inherited", kept)
		}
	}
}
