package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
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

// BenchmarkAuditRecordPath: what a call itself spends on its audit record
// (building it and handing it to the writer), with a search's arguments
// and a 10-hit answer; the writer derives ids off this path.
func BenchmarkAuditRecordPath(b *testing.B) {
	s := &Server{cfg: Config{Audit: AuditConfig{Buffer: 1 << 16, Batch: 500, FlushInterval: 10 * time.Millisecond}},
		logger: slog.New(slog.NewTextHandler(io.Discard, nil)), metrics: newMetrics()}
	sink := &countingSink{}
	s.audit = s.newAuditor(sink)
	p := &tenancy.Principal{OrgID: uuid.New(), AgentID: uuid.New(), TokenID: uuid.New()}
	req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "search_knowledge", Arguments: json.RawMessage(`{"query":"kafka use and","limit":10}`)}}
	hits := make([]map[string]any, 10)
	for i := range hits {
		hits[i] = map[string]any{"id": uuid.NewString(), "title": "a title", "snippet": "a snippet of the body", "score": 0.5}
	}
	raw, _ := json.Marshal(map[string]any{"hits": hits})
	res := &mcp.CallToolResult{StructuredContent: json.RawMessage(raw)}
	start := time.Now()
	for b.Loop() {
		s.auditTool(p, "search_knowledge", req, res, "ok", start, time.Millisecond)
	}
	b.StopTimer()
	s.audit.close(context.Background())
	if sink.n.Load() != int64(b.N) {
		b.Fatalf("%d records written, want %d", sink.n.Load(), b.N)
	}
}

// TestAuditFinishKeepsIdsAndNoText: what the writer keeps of a call.
func TestAuditFinishKeepsIdsAndNoText(t *testing.T) {
	a := &auditor{logger: slog.New(slog.NewTextHandler(io.Discard, nil)), sink: &countingSink{}}
	old, nw, hit := uuid.New(), uuid.New(), uuid.New()
	ev := a.finish(context.Background(), auditRecord{
		args:   json.RawMessage(`{"oldId":"` + old.String() + `","newId":"` + nw.String() + `","query":"héllo wörld","reason":"secret"}`),
		result: json.RawMessage(`{"hits":[{"id":"` + hit.String() + `","title":"secret"},{"id":"not-a-uuid"}],"chain":[{"oldId":"` + old.String() + `"}]}`),
	})
	if len(ev.EntryIDs) != 3 || ev.EntryIDs[0] != old || ev.EntryIDs[1] != nw || ev.EntryIDs[2] != hit {
		t.Fatalf("ids %v", ev.EntryIDs)
	}
	if ev.QueryLength == nil || *ev.QueryLength != 11 || ev.QueryHash != nil {
		t.Fatalf("query %v %x (no key: no hash)", ev.QueryLength, ev.QueryHash)
	}
}
