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

// TestParseBaseCtl: a base of its own schema is made ready by its own
// worker, so it takes -worker and -base-worker, and is stored one by one.
func TestParseBaseCtl(t *testing.T) {
	ok := []string{"-base", "/b/mcp", "-worker", "-base-worker", "/b/worker", "-base-ctl", "/b/ctl", "-sizes", "5000"}
	if o, err := parse(ok); err != nil || o.baseCtl != "/b/ctl" {
		t.Fatalf("%v: %v", ok, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-base", "/b/mcp", "-base-ctl", "/b/ctl", "-sizes", "5000"}, "goes with -base, -worker"},
		{append(slices.Clone(ok), "-base-index-versions"), "-base-index-versions"},
		{append(slices.Clone(ok), "-sizes", "5000,100000"), "sizes up to -store-all"},
	} {
		if _, err := parse(c.args); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one naming %q", c.args, err, c.want)
		}
	}
}

// TestParseBootstrap reads the ids and token of `ctl dev bootstrap`, and
// refuses an answer without them.
func TestParseBootstrap(t *testing.T) {
	org, agent, tok, err := parseBootstrap([]byte("org 4b1c2a1e-6a36-4d43-9d0c-1f3c7b1d2e01\nagent 9f0e8d7c-6b5a-4c3d-8e2f-1a0b9c8d7e6f\ntoken kn_abc\n"))
	if err != nil || org.String() != "4b1c2a1e-6a36-4d43-9d0c-1f3c7b1d2e01" || agent.String() != "9f0e8d7c-6b5a-4c3d-8e2f-1a0b9c8d7e6f" || tok != "kn_abc" {
		t.Errorf("got %v %v %q %v", org, agent, tok, err)
	}
	if _, _, _, err := parseBootstrap([]byte("org 4b1c2a1e-6a36-4d43-9d0c-1f3c7b1d2e01\ntoken kn_abc\n")); err == nil || !strings.Contains(err.Error(), "agent") {
		t.Errorf("without the agent: %v", err)
	}
}
