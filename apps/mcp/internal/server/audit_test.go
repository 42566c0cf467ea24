package server_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentfleet/orchestrator/apps/mcp/internal/server"
	kt "github.com/agentfleet/orchestrator/apps/mcp/internal/tools/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// auditSink is the audit trail of a test server, when it wants one.
func auditSink(on bool, pool *pgxpool.Pool) server.AuditSink {
	if !on {
		return nil
	}
	return tenancy.New(pool)
}

type auditRow struct {
	agent, token uuid.UUID
	kind, name   string
	ids          []uuid.UUID
	outcome      string
	durationUs   int64
	queryLen     *int32
	queryHash    []byte
	text         string // the whole row as text
}

func auditRows(t *testing.T, b *bundle, org uuid.UUID) []auditRow {
	t.Helper()
	rows, err := b.db.Pool.Query(context.Background(), `SELECT agent_id, token_id, kind, name, entry_ids, outcome, duration_us, query_length, query_hash, a::text
		FROM audit_events a WHERE org_id = $1 ORDER BY at, id`, org)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []auditRow
	for rows.Next() {
		var r auditRow
		if err := rows.Scan(&r.agent, &r.token, &r.kind, &r.name, &r.ids, &r.outcome, &r.durationUs, &r.queryLen, &r.queryHash, &r.text); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestAuditTrail: every tool call and resource read of a verified token is
// recorded (also refused ones), with the entries it touched, and nothing of
// a title, a body or a query; a query is its length and a keyed hash that
// is the same for the same query. Shutdown writes every waiting record.
func TestAuditTrail(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{audit: true})
	org := b.org("acme")
	a := b.agent(org, "scout", allScopes, time.Hour)
	reader := b.token(a, []string{tenancy.ScopeKnowledgeRead}, time.Hour)
	otherOrg := b.org("other")
	eve := b.agent(otherOrg, "eve", allScopes, time.Hour)
	cs := b.session(a)

	const title, body, query = "Zebra secret title", "Body with the password hunter2 inside", "hunter2 zebra"
	first := b.store(cs, map[string]any{"title": title, "body": body, "tags": []string{"ops"}})
	second := b.store(cs, map[string]any{"title": "Zebra secret title v2", "body": "corrected hunter2"})
	call(t, cs, kt.ToolSupersede, map[string]any{"oldId": first.ID.String(), "newId": second.ID.String()})
	search := call(t, cs, kt.ToolSearch, map[string]any{"query": query, "includeSuperseded": true})
	call(t, cs, kt.ToolSearch, map[string]any{"query": query})
	call(t, cs, kt.ToolSearch, map[string]any{"query": "another query"})
	call(t, cs, kt.ToolGet, map[string]any{"id": uuid.NewString()}) // not found: still recorded
	if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "knowledge://" + second.ID.String()}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: kt.StatsURI}); err != nil {
		t.Fatal(err)
	}
	// Refused for the scope (HTTP 403 before MCP): recorded too.
	rs := b.session(reader)
	if _, err := rs.CallTool(context.Background(), &mcp.CallToolParams{Name: kt.ToolStore, Arguments: map[string]any{"title": title, "body": body}}); err == nil {
		t.Fatal("a read-only token stored")
	}
	es := b.session(eve)
	call(t, es, kt.ToolSearch, map[string]any{"query": query})

	// Shutdown drains the writer: every record is in the table after it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	rows := auditRows(t, b, org)
	var names []string
	for _, r := range rows {
		names = append(names, r.kind+":"+r.name+":"+r.outcome)
		for _, secret := range []string{"Zebra", "zebra", "hunter2", "password", "corrected", "another query"} {
			if strings.Contains(r.text, secret) {
				t.Fatalf("an audit record holds %q: %s", secret, r.text)
			}
		}
		if r.agent != a.id && r.agent != reader.id {
			t.Fatalf("record of agent %v", r.agent)
		}
	}
	want := []string{
		"tool:store_knowledge:ok", "tool:store_knowledge:ok", "tool:supersede_knowledge:ok",
		"tool:search_knowledge:ok", "tool:search_knowledge:ok", "tool:search_knowledge:ok",
		"tool:get_knowledge:not_found", "resource:knowledge_entry:ok", "resource:org_stats:ok",
		"tool:store_knowledge:forbidden",
	}
	if !slices.Equal(names, want) {
		t.Fatalf("records:\n%v\nwant\n%v", names, want)
	}
	if rows[9].token != reader.tokenID || rows[0].token != a.tokenID {
		t.Fatalf("token ids: %v %v", rows[9].token, rows[0].token)
	}
	if !slices.Equal(rows[0].ids, []uuid.UUID{first.ID}) || !slices.Contains(rows[2].ids, first.ID) || !slices.Contains(rows[2].ids, second.ID) {
		t.Fatalf("entry ids: store %v, supersede %v", rows[0].ids, rows[2].ids)
	}
	hits := ok[knowledge.SearchResult](t, search)
	for _, h := range hits.Hits {
		if !slices.Contains(rows[3].ids, h.ID) {
			t.Fatalf("search record %v lacks hit %v", rows[3].ids, h.ID)
		}
	}
	if len(hits.Hits) == 0 || !slices.Contains(rows[7].ids, second.ID) {
		t.Fatalf("hits %d, resource ids %v", len(hits.Hits), rows[7].ids)
	}
	s1, s2, s3 := rows[3], rows[4], rows[5]
	if s1.queryLen == nil || *s1.queryLen != int32(len(query)) || len(s1.queryHash) != 16 {
		t.Fatalf("query length %v, hash %x", s1.queryLen, s1.queryHash)
	}
	if string(s1.queryHash) != string(s2.queryHash) || string(s1.queryHash) == string(s3.queryHash) {
		t.Fatal("the same query must hash the same, another query differently")
	}
	if rows[0].queryLen != nil || rows[0].queryHash != nil {
		t.Fatal("a store has no query")
	}
	// The other org's search is its own org's record (same hash: one key).
	other := auditRows(t, b, otherOrg)
	if len(other) != 1 || other[0].name != kt.ToolSearch || string(other[0].queryHash) != string(s1.queryHash) {
		t.Fatalf("other org's records: %+v", other)
	}
	// Append-only.
	if _, err := b.db.Pool.Exec(context.Background(), `UPDATE audit_events SET outcome = 'ok' WHERE org_id = $1`, org); err == nil {
		t.Fatal("an audit record was updated")
	}
}

// TestAuditWhenTheBufferIsFull: with a buffer of one record and a long
// flush interval, the records that do not fit are written after their
// calls' answers without waiting for the flush: none is lost.
func TestAuditWhenTheBufferIsFull(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{audit: true, config: func(c *server.Config) {
		c.Audit = server.AuditConfig{Buffer: 1, Batch: 1000, FlushInterval: 5 * time.Second}
	}})
	org := b.org("acme")
	a := b.agent(org, "scout", allScopes, time.Hour)
	cs := b.session(a)
	const n = 20
	for i := range n {
		b.store(cs, map[string]any{"title": fmt.Sprintf("entry %d", i), "body": "b"})
	}
	// Before shutdown and well before the flush interval: the records
	// beyond the buffer are written by the work after each answer (the
	// last call's may still be on its way when its answer arrives).
	got := 0
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if got = len(auditRows(t, b, org)); got >= n-1 || time.Now().After(deadline) {
			break
		}
	}
	if got < n-1 {
		t.Fatalf("%d records written within 2 s of the last answer (flush interval 5 s), want at least %d", got, n-1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if got := len(auditRows(t, b, org)); got != n {
		t.Fatalf("%d records, want %d", got, n)
	}
}
