package main

import (
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
