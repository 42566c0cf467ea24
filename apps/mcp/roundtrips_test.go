package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/apps/mcp/internal/stages"
	"github.com/agentfleet/orchestrator/packages/tenancy"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

// TestRoundTripsPerCall runs the server over stdio as agents do, with the
// stage clock on (MCP_STAGES_FILE) and the production defaults (rate
// limits on), and counts what each call waits for: one Redis round trip
// for a store, with or without a client token (the rate limits, and the
// token's record read in the same pipeline), for its replay and for a
// search; a search's statements, each its own PostgreSQL round trip.
func TestRoundTripsPerCall(t *testing.T) {
	t.Parallel()
	d := testenv.Postgres(t)
	r := testenv.LeaseRedis(t)
	ctx := context.Background()
	ten := tenancy.New(d.Pool)
	org, err := ten.CreateOrg(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	ag, err := ten.CreateAgent(ctx, org.ID, "scout")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := ten.IssueToken(ctx, org.ID, ag.ID, tenancy.Catalogue, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A Redis that never ran the rate limits' script, as on a new machine
	// or after a restart: the server loads it as it starts, so even the
	// first call finds it (other tests' calls that meet NOSCRIPT meanwhile
	// send it whole once more).
	if err := r.Client.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "stages.jsonl")
	env := map[string]string{"DATABASE_URL": d.AppURL(), "REDIS_URL": r.URL, "KNOWLEDGE_TOKEN": tok.Token, "MCP_STAGES_FILE": file}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	logs := &testenv.Buffer{}
	errc := make(chan error, 1)
	go func() {
		errc <- run(ctx, []string{"--stdio"}, func(k string) string { return env[k] }, inR, outW, logs)
		outW.Close()
	}()
	out := bufio.NewReader(outR)
	id := 0
	send := func(method string, params any) string {
		t.Helper()
		id++
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		if _, err := inW.Write(append(b, '\n')); err != nil {
			t.Fatalf("write: %v; stderr: %s", err, logs.String())
		}
		line, err := out.ReadString('\n')
		if err != nil {
			t.Fatalf("read: %v; stderr: %s", err, logs.String())
		}
		if strings.Contains(line, `"isError":true`) || strings.Contains(line, `"error":{`) {
			t.Fatalf("%s: %s", method, line)
		}
		return line
	}
	send("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "t", "version": "0"}})
	io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	store := func(title string, token *uuid.UUID) string {
		args := map[string]any{"title": title, "body": "restart the worker after a deploy of " + title}
		if token != nil {
			args["clientToken"] = token.String()
		}
		return send("tools/call", map[string]any{"name": "store_knowledge", "arguments": args})
	}
	store("runbook one", nil)
	token := uuid.New()
	store("runbook two", &token)
	if replay := store("runbook two", &token); !strings.Contains(replay, `\"replayed\":true`) {
		t.Fatalf("the same client token again: %s", replay)
	}
	const searches = 4
	for range searches {
		send("tools/call", map[string]any{"name": "search_knowledge", "arguments": map[string]any{"query": "restart worker"}})
	}
	inW.Close()
	if err := <-errc; err != nil {
		t.Fatalf("run: %v; stderr: %s", err, logs.String())
	}

	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var recs []stages.Record
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var rec stages.Record
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	var got []string
	for _, rec := range recs {
		got = append(got, fmt.Sprintf("%s: %d Redis, %d PostgreSQL (after it: %d, %d)", rec.Name, rec.RedisTrips, rec.DBTrips, rec.RedisTripsAfter, rec.DBTripsAfter))
	}
	t.Logf("round trips each call waited for: %s", strings.Join(got, "; "))
	if len(recs) != 3+searches {
		t.Fatalf("%d stage records, want the %d calls': %s", len(recs), 3+searches, got)
	}
	// A search: its two ranking statements, at once on two connections,
	// then one read of its hits' bodies and documents. The first of the
	// process also counts the table's entries (kept 30 s) and learns, on a
	// Citus cluster, each statement's description (internal/orgcall). On a
	// cluster the statements go through knowledge_run_org, on connections
	// to the org's worker opened on first use (internal/data/nodes.go), and
	// pgx prepares the call once on each connection (a single node's
	// connections are warmed as they open): there the steady state is the
	// least of the repeats, and a repeat pays at most, for each of its
	// three statements, a new connection (pgvector's types: one round
	// trip) and a preparation more.
	trips := []int{}
	for _, r := range recs[4:] {
		trips = append(trips, r.DBTrips)
	}
	if testenv.IsCluster() {
		if slices.Min(trips) > 3 || slices.Max(trips) > 9 {
			t.Errorf("the same search repeated made %v PostgreSQL round trips, want at most 3 once warm, 9 at most", trips)
		}
	} else if slices.Max(trips) > 3 {
		t.Errorf("the same search repeated made %v PostgreSQL round trips, want at most 3 each (two ranking statements at once, the hits' read)", trips)
	}
	for i, rec := range recs {
		if rec.RedisTrips != 1 {
			t.Errorf("call %d (%s) waited for %d Redis round trips, want 1", i+1, rec.Name, rec.RedisTrips)
		}
		if rec.DBTrips < 1 {
			t.Errorf("call %d (%s) made no PostgreSQL round trip: the tracer does not count", i+1, rec.Name)
		}
	}
}
