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
	if err != nil || c.Addr != server.DefaultAddr || c.MaxInFlight != server.DefaultMaxInFlight || c.QueryEmbedBudget != time.Second {
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
