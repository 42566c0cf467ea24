package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentfleet/orchestrator/packages/tenancy"
)

type countingSink struct{ n atomic.Int64 }

func (c *countingSink) WriteAudit(_ context.Context, ev []tenancy.AuditEvent) error {
	c.n.Add(int64(len(ev)))
	return nil
}

func (c *countingSink) QueryHasher(context.Context) (*tenancy.QueryHasher, error) {
	return nil, io.EOF // no key: records keep the length only
}

// BenchmarkAuditRecordPath: what a call spends on its audit record
// (scanning its arguments and answer for entry ids, building the record,
// handing it to the writer), for a search (a 10-hit answer) and for a
// get_knowledge of a 32,000-character body; the writer (its hashing) runs
// alongside on the same cores with a sink that discards.
func BenchmarkAuditRecordPath(b *testing.B) {
	s := &Server{cfg: Config{Audit: AuditConfig{Buffer: 1 << 16, Batch: 500, FlushInterval: 10 * time.Millisecond}},
		logger: slog.New(slog.NewTextHandler(io.Discard, nil)), metrics: newMetrics()}
	sink := &countingSink{}
	s.audit = s.newAuditor(sink)
	p := &tenancy.Principal{OrgID: uuid.New(), AgentID: uuid.New(), TokenID: uuid.New()}
	hits := make([]map[string]any, 10)
	for i := range hits {
		hits[i] = map[string]any{"id": uuid.NewString(), "title": "a title", "snippet": strings.Repeat("a snippet ", 24), "score": 0.5}
	}
	searchRes, _ := json.Marshal(map[string]any{"hits": hits})
	getRes, _ := json.Marshal(map[string]any{"id": uuid.NewString(), "title": "a title", "body": strings.Repeat("a long body ", 2666),
		"chain": []map[string]any{{"oldId": uuid.NewString(), "newId": uuid.NewString()}}})
	cases := []struct {
		name string
		args string
		res  []byte
	}{
		{"search", `{"query":"kafka use and","limit":10}`, searchRes},
		{"get-32k", `{"id":"` + uuid.NewString() + `"}`, getRes},
	}
	start := time.Now()
	n := 0
	for _, c := range cases {
		req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "x", Arguments: json.RawMessage(c.args)}}
		res := &mcp.CallToolResult{StructuredContent: json.RawMessage(c.res)}
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				s.auditTool(p, "search_knowledge", req, res, "ok", start, time.Millisecond)
				n++
			}
		})
	}
	s.audit.close(context.Background())
	if sink.n.Load() != int64(n) {
		b.Fatalf("%d records written, want %d", sink.n.Load(), n)
	}
}

// TestAuditIDScan: the ids of the keys id, oldId and newId, in order of
// the keys, once each, at any depth, with or without spaces; never from
// inside a string (a body quoting JSON), never a value that is no uuid.
func TestAuditIDScan(t *testing.T) {
	old, nw, hit, quoted := uuid.New(), uuid.New(), uuid.New(), uuid.New()
	ids := newIDSet()
	ids.scan(json.RawMessage(`{"oldId": "` + old.String() + `" , "newId":"` + nw.String() + `","query":"héllo wörld","reason":"secret"}`))
	body, _ := json.Marshal(map[string]any{"body": `look: {"id":"` + quoted.String() + `"}`, "id": "not-a-uuid"})
	ids.scan(body)
	ids.scan(json.RawMessage(`{"hits":[{"id":"` + hit.String() + `","title":"secret"},{"id":"` + hit.String() + `"}],"chain":[{"oldId":"` + old.String() + `"}],"id":`))
	if len(ids.list) != 3 || ids.list[0] != old || ids.list[1] != nw || ids.list[2] != hit {
		t.Fatalf("ids %v (quoted %v must not be there)", ids.list, quoted)
	}
}

// TestAuditFinishKeepsTheQueryOnlyAsLengthAndHash: what the writer keeps
// of a query.
func TestAuditFinishKeepsTheQueryOnlyAsLengthAndHash(t *testing.T) {
	a := &auditor{logger: slog.New(slog.NewTextHandler(io.Discard, nil)), sink: &countingSink{}}
	ev := a.finish(context.Background(), auditRecord{query: json.RawMessage(`{"query":"héllo wörld","limit":3}`)})
	if ev.QueryLength == nil || *ev.QueryLength != 11 || ev.QueryHash != nil {
		t.Fatalf("query %v %x (no key: no hash)", ev.QueryLength, ev.QueryHash)
	}
}
