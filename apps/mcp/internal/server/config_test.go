package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agentfleet/orchestrator/apps/mcp/internal/server"
	"github.com/agentfleet/orchestrator/packages/appenv"
)

// The configuration is read the apps' one way (packages/appenv): defaults
// for everything, every bad value reported at once with its variable.
func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	env := appenv.Vars
	c, err := server.ConfigFromEnv(env())
	if err != nil || c.Addr != server.DefaultAddr || c.MaxInFlight != server.DefaultMaxInFlight || c.QueryEmbedBudget != 0 { // 0: the service's default
		t.Fatalf("defaults: %+v %v", c, err)
	}
	c, err = server.ConfigFromEnv(env("SEARCH_EMBED_BUDGET", "250ms", "MCP_RATE_ORG_READS", "unlimited", "MCP_RATE_AGENT_WRITES", "30"))
	if err != nil || c.QueryEmbedBudget != 250*time.Millisecond || c.RateLimits.OrgReads != nil || *c.RateLimits.AgentWrites != 30 {
		t.Fatalf("set: %+v %v", c, err)
	}
	_, err = server.ConfigFromEnv(env("MCP_MAX_INFLIGHT", "0", "MCP_CALL_TIMEOUT", "forever", "SEARCH_EMBED_BUDGET", "1ms",
		"MCP_RATE_ORG_WRITES", "lots", "MCP_PUBLIC_URL", "mcp.example.com", "SEARCH_COSINE_FLOOR", "2"))
	for _, name := range []string{"MCP_MAX_INFLIGHT", "MCP_CALL_TIMEOUT", "SEARCH_EMBED_BUDGET", "MCP_RATE_ORG_WRITES", "MCP_PUBLIC_URL", "SEARCH_COSINE_FLOOR"} {
		if err == nil || !strings.Contains(err.Error(), name+"=") {
			t.Errorf("want %s named in %v", name, err)
		}
	}
}

// The audit trail's writer settings: defaults, values, refusals by name.
func TestAuditConfigFromEnv(t *testing.T) {
	t.Parallel()
	env := appenv.Vars
	c, err := server.ConfigFromEnv(env())
	want := server.AuditConfig{Buffer: server.DefaultAuditBuffer, Batch: server.DefaultAuditBatch, FlushInterval: server.DefaultAuditFlushInterval}
	if err != nil || c.Audit != want {
		t.Fatalf("defaults: %+v %v", c.Audit, err)
	}
	c, err = server.ConfigFromEnv(env("MCP_AUDIT_BUFFER", "100", "MCP_AUDIT_BATCH", "10", "MCP_AUDIT_FLUSH_INTERVAL", "1s"))
	if err != nil || c.Audit != (server.AuditConfig{Buffer: 100, Batch: 10, FlushInterval: time.Second}) {
		t.Fatalf("set: %+v %v", c.Audit, err)
	}
	_, err = server.ConfigFromEnv(env("MCP_AUDIT_BUFFER", "0", "MCP_AUDIT_BATCH", "many", "MCP_AUDIT_FLUSH_INTERVAL", "1h"))
	for _, name := range []string{"MCP_AUDIT_BUFFER", "MCP_AUDIT_BATCH", "MCP_AUDIT_FLUSH_INTERVAL"} {
		if err == nil || !strings.Contains(err.Error(), name+"=") {
			t.Errorf("want %s named in %v", name, err)
		}
	}
}

// A default rate limit reads like every limit an operator sets
// (tenancy.ParseLimit): -1 is unlimited, 0 and other negatives are refused
// by the variable's range.
func TestRateDefaultsReadAsLimits(t *testing.T) {
	t.Parallel()
	env := appenv.Vars
	c, err := server.ConfigFromEnv(env("MCP_RATE_AGENT_READS", "-1", "MCP_RATE_ORG_WRITES", "1000000"))
	if err != nil || c.RateLimits.AgentReads != nil || *c.RateLimits.OrgWrites != 1_000_000 {
		t.Fatalf("set: %+v %v", c.RateLimits, err)
	}
	for _, v := range []string{"0", "-2", "1000001", "Unlimited", "1.5"} {
		_, err := server.ConfigFromEnv(env("MCP_RATE_ORG_READS", v))
		if err == nil || !strings.Contains(err.Error(), "MCP_RATE_ORG_READS=") || !strings.Contains(err.Error(), "or unlimited") {
			t.Errorf("MCP_RATE_ORG_READS=%q: %v", v, err)
		}
	}
}
