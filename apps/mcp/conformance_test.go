package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentfleet/orchestrator/apps/mcp/internal/server"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// conformanceScenarios are the server scenarios of the MCP conformance
// suite (@modelcontextprotocol/conformance, the protocol maintainers'
// package; its version is pinned in scripts/conformance.sh) that apply to
// this server: they test the protocol, not tools, resources or prompts of
// the suite's own test server. docs/mcp.md ("Conformance") says why each
// other scenario does not apply.
var conformanceScenarios = []string{
	"server-initialize",
	"ping",
	"logging-set-level",
	"completion-complete",
	"tools-list",
	"resources-list",
	"dns-rebinding-protection",
}

// TestConformance runs the conformance suite's applicable scenarios
// against the server over HTTP, each of whose checks must succeed. It
// runs when MCP_CONFORMANCE names the suite's executable (go tool task
// test:conformance installs it and sets it); MCP_CONFORMANCE_SCENARIOS
// (comma-separated) runs others instead.
//
// The suite has no way to send a bearer token, so it talks to a proxy in
// front of the server that adds one (an agent's token with every scope)
// and passes Host and Origin through untouched, so the DNS-rebinding
// scenario still sees what the server answers to its forged headers.
func TestConformance(t *testing.T) {
	bin := os.Getenv("MCP_CONFORMANCE")
	if bin == "" {
		t.Skip("MCP_CONFORMANCE is not set: go tool task test:conformance runs the MCP conformance suite")
	}
	scenarios := conformanceScenarios
	if s := os.Getenv("MCP_CONFORMANCE_SCENARIOS"); s != "" {
		scenarios = strings.Split(s, ",")
	}
	d := testenv.Postgres(t)
	r := testenv.LeaseRedis(t)
	srv := startRun(t, map[string]string{"MCP_ADDR": "127.0.0.1:0", "DATABASE_URL": d.AppURL(), "REDIS_URL": r.URL})
	tok := testfactory.Token(context.Background(), t, d.Pool, nil)
	target, _ := url.Parse(srv.base)
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
			pr.Out.Header.Set("Authorization", "Bearer "+tok.Text)
		},
		FlushInterval: -1, // server-sent events as they come
	}
	front := httptest.NewServer(proxy)
	defer front.Close()
	for _, sc := range scenarios {
		t.Run(sc, func(t *testing.T) {
			out := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "server", "--url", front.URL+server.PathMCP, "--scenario", sc, "-o", out)
			text, err := cmd.CombinedOutput()
			checks := readChecks(t, out)
			failed := 0
			for _, c := range checks {
				if c.Status != "SUCCESS" && c.Status != "INFO" {
					failed++
					t.Errorf("%s: %s %s: %s", c.ID, c.Status, c.Description, c.ErrorMessage)
				}
			}
			if len(checks) == 0 || err != nil || failed > 0 {
				t.Fatalf("scenario %s: %d checks, %d not successful, exit %v; output:\n%s", sc, len(checks), failed, err, text)
			}
			t.Logf("%d checks passed", len(checks))
		})
	}
}

type conformanceCheck struct {
	ID           string `json:"id"`
	Description  string `json:"description"`
	Status       string `json:"status"`
	ErrorMessage string `json:"errorMessage"`
}

// readChecks reads the checks.json files the suite wrote under dir.
func readChecks(t *testing.T, dir string) []conformanceCheck {
	t.Helper()
	var all []conformanceCheck
	_ = filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() || filepath.Base(p) != "checks.json" {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var cs []conformanceCheck
		if err := json.Unmarshal(b, &cs); err != nil {
			t.Errorf("%s: %v", p, err)
		}
		all = append(all, cs...)
		return nil
	})
	return all
}
