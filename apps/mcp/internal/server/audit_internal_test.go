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

// partialSink writes all but the last org's records on its first call
// (a Citus worker's transaction failed: tenancy.PartialWrite), then all.
type partialSink struct {
	calls [][]tenancy.AuditEvent
}

func (p *partialSink) WriteAudit(_ context.Context, ev []tenancy.AuditEvent) error {
	p.calls = append(p.calls, ev)
	if len(p.calls) > 1 {
		return nil
	}
	last := ev[len(ev)-1].OrgID
	var rest []tenancy.AuditEvent
	for _, e := range ev {
		if e.OrgID == last {
			rest = append(rest, e)
		}
	}
	return &tenancy.PartialWrite{Rest: rest, Err: io.ErrUnexpectedEOF}
}

func (p *partialSink) QueryHasher(context.Context) (*tenancy.QueryHasher, error) { return nil, io.EOF }

// A batch written in part is retried for the records not written only:
// none is written twice, none lost.
func TestAuditRetriesTheRestOfAPartialWrite(t *testing.T) {
	s := &Server{cfg: Config{Audit: AuditConfig{Buffer: 64, Batch: 64, FlushInterval: time.Hour}},
		logger: slog.New(slog.NewTextHandler(io.Discard, nil)), metrics: newMetrics()}
	sink := &partialSink{}
	a := s.newAuditor(sink)
	one, other := uuid.New(), uuid.New()
	var batch []auditRecord
	for _, org := range []uuid.UUID{one, one, other, other, other} {
		batch = append(batch, auditRecord{ev: tenancy.AuditEvent{OrgID: org, Kind: tenancy.AuditTool, Name: "store_knowledge", Outcome: "ok"}})
	}
	a.flush(batch, true)
	if len(sink.calls) != 2 || len(sink.calls[0]) != 5 || len(sink.calls[1]) != 3 {
		t.Fatalf("writes of %v records, want 5 then the 3 not written", lens(sink.calls))
	}
	for _, e := range sink.calls[1] {
		if e.OrgID != other {
			t.Fatal("a record written by the first call was sent again")
		}
	}
}

func lens(calls [][]tenancy.AuditEvent) []int {
	out := make([]int, len(calls))
	for i, c := range calls {
		out[i] = len(c)
	}
	return out
}
