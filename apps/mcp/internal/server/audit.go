package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentfleet/orchestrator/packages/appenv"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// The audit trail (docs/operators.md, "Audit trail"): every tool call and
// resource read that reaches a verified token is recorded in audit_events
// (packages/tenancy/audit.go), off the request path:
//
//   - The call's own goroutine builds a small record: the entry ids, found
//     by scanning the arguments and the answer it already holds as JSON for
//     the keys "id", "oldId" and "newId" (no decoding: a few microseconds
//     for a 32,000-character body), and, for a call with a "query", a copy
//     of its arguments. Nothing else of a call stays in memory, so a full
//     buffer holds ids, not bodies. It hands the record to a buffered
//     channel without blocking.
//   - One writer goroutine takes records from the channel, and every
//     AuditConfig.FlushInterval, or as soon as AuditConfig.Batch records
//     are waiting, derives the query's length and keyed hash and writes the
//     batch in one round trip (tenancy.WriteAudit). A failed write is
//     retried (with back-off) until it succeeds or the server shuts down;
//     records keep arriving in the channel meanwhile. On a Citus cluster a
//     batch is one transaction per worker, and a retry sends only the
//     records not written (tenancy.PartialWrite).
//   - When the channel is full (the database is slow or down), the call
//     writes its own record synchronously before it answers: the call
//     slows down instead of the record being dropped. Only when that write
//     fails too is the record lost, counted in mcp_audit_records_lost_total
//     and logged at error level (the call itself then most likely failed
//     for the same reason).
//   - Shutdown (SIGTERM, stdin closed) drains the channel and writes every
//     record before the process exits.
//
// What an abrupt end (SIGKILL, out of memory, power loss) can lose: the
// records still in memory, that is of calls answered within the last
// FlushInterval (100 ms by default) plus a batch being written, at most
// Buffer + Batch records. That is the price of keeping the write off the
// calls; docs/operators.md states it.

// AuditSink stores audit records (tenancy.Service).
type AuditSink interface {
	WriteAudit(ctx context.Context, events []tenancy.AuditEvent) error
	QueryHasher(ctx context.Context) (*tenancy.QueryHasher, error)
}

// AuditConfig tunes the audit writer.
type AuditConfig struct {
	Buffer        int           // MCP_AUDIT_BUFFER: records waiting at most; beyond, calls write their own
	Batch         int           // MCP_AUDIT_BATCH: records one write takes at most
	FlushInterval time.Duration // MCP_AUDIT_FLUSH_INTERVAL: longest wait of a record before its write starts
}

// Defaults of AuditConfig.
const (
	DefaultAuditBuffer        = 8192
	DefaultAuditBatch         = 500
	DefaultAuditFlushInterval = 100 * time.Millisecond
)

func readAuditConfig(e *appenv.Env) AuditConfig {
	return AuditConfig{
		Buffer:        e.Int("MCP_AUDIT_BUFFER", DefaultAuditBuffer, 1, 1_000_000),
		Batch:         e.Int("MCP_AUDIT_BATCH", DefaultAuditBatch, 1, 10_000),
		FlushInterval: e.Duration("MCP_AUDIT_FLUSH_INTERVAL", DefaultAuditFlushInterval, time.Millisecond, 10*time.Second),
	}
}

// auditRecord is what a call hands over: the record with its entry ids,
// and the arguments of a call with a query (hashed off the request path).
type auditRecord struct {
	ev    tenancy.AuditEvent
	query json.RawMessage // the arguments, when they hold a "query"
}

// maxAuditEntryIDs bounds the ids one record keeps (a list page holds at
// most 100 entries, a search 50 hits; the rest of a result's ids, such as
// a chain's, are cut).
const maxAuditEntryIDs = 200

type auditor struct {
	sink   AuditSink
	cfg    AuditConfig
	logger interface {
		Error(msg string, args ...any)
		Warn(msg string, args ...any)
	}
	ch   chan auditRecord
	kick chan struct{} // a batch is waiting

	mu     sync.RWMutex // closed, quit's close
	closed bool
	quit   chan struct{} // closed when no record may arrive any more
	done   chan struct{} // closed when the writer has written them all

	hashMu    sync.Mutex
	hasher    *tenancy.QueryHasher
	hashRetry time.Time // no new attempt to read the key before

	written, lost, sync_ prometheus.Counter
	flushDur             prometheus.Histogram
}

func (s *Server) newAuditor(sink AuditSink) *auditor {
	if sink == nil {
		return nil
	}
	cfg := s.cfg.Audit
	if cfg.Buffer <= 0 {
		cfg.Buffer = DefaultAuditBuffer
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultAuditBatch
	}
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = DefaultAuditFlushInterval
	}
	a := &auditor{
		sink: sink, cfg: cfg, logger: s.logger,
		ch:   make(chan auditRecord, cfg.Buffer),
		kick: make(chan struct{}, 1),
		quit: make(chan struct{}),
		done: make(chan struct{}),
		written: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcp_audit_records_written_total", Help: "Audit records written to PostgreSQL."}),
		lost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcp_audit_records_lost_total", Help: "Audit records that could not be written (see the error log)."}),
		sync_: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcp_audit_records_sync_total", Help: "Audit records written by the call itself because the buffer was full."}),
		flushDur: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "mcp_audit_flush_duration_seconds", Help: "Duration of one audit batch write.", Buckets: latencyBuckets}),
	}
	s.metrics.reg.MustRegister(a.written, a.lost, a.sync_, a.flushDur)
	go a.run()
	return a
}

// record hands one call's record to the writer (see above).
func (a *auditor) record(r auditRecord) {
	if a == nil {
		return
	}
	a.mu.RLock()
	if !a.closed {
		select {
		case a.ch <- r:
			a.mu.RUnlock()
			if len(a.ch) >= a.cfg.Batch {
				select {
				case a.kick <- struct{}{}:
				default: // kicked already
				}
			}
			return
		default:
		}
	}
	a.mu.RUnlock()
	// Full (or shutting down): this call writes its own record.
	a.sync_.Inc()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	batch := []tenancy.AuditEvent{a.finish(ctx, r)}
	if err := a.sink.WriteAudit(ctx, batch); err != nil {
		a.lost.Inc()
		a.logger.Error("audit record lost: the buffer is full and the write failed", "org", r.ev.OrgID, "name", r.ev.Name, "err", err)
		return
	}
	a.written.Inc()
}

// close stops taking records and writes every waiting one, until ctx ends.
func (a *auditor) close(ctx context.Context) {
	if a == nil {
		return
	}
	a.mu.Lock()
	if !a.closed {
		a.closed = true
		close(a.quit)
	}
	a.mu.Unlock()
	select {
	case <-a.done:
	case <-ctx.Done():
		a.logger.Error("audit records not written before shutdown ended", "waiting", len(a.ch))
	}
}

// run is the writer goroutine. Records wait in the channel (so Buffer
// bounds them, and a full channel sends calls to the synchronous path)
// until the flush interval passes or a batch is waiting; then it writes
// what is there, a batch at a time.
func (a *auditor) run() {
	defer close(a.done)
	tick := time.NewTicker(a.cfg.FlushInterval)
	defer tick.Stop()
	batch := make([]auditRecord, 0, a.cfg.Batch)
	for {
		open := true
		select {
		case <-tick.C:
		case <-a.kick:
		case <-a.quit:
			open = false
		}
		for {
			batch = batch[:0]
		take:
			for len(batch) < a.cfg.Batch {
				select {
				case r := <-a.ch:
					batch = append(batch, r)
				default:
					break take
				}
			}
			if len(batch) == 0 {
				break
			}
			a.flush(batch, open)
			if len(batch) < a.cfg.Batch {
				break
			}
		}
		if !open {
			return
		}
	}
}

// flush writes one batch, retrying while the server runs. Once it is
// shutting down (open false) it tries a few times more, then gives up.
func (a *auditor) flush(batch []auditRecord, open bool) {
	events := make([]tenancy.AuditEvent, len(batch))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	for i, r := range batch {
		events[i] = a.finish(ctx, r)
	}
	cancel()
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := a.sink.WriteAudit(ctx, events)
		cancel()
		a.flushDur.Observe(time.Since(start).Seconds())
		if err == nil {
			a.written.Add(float64(len(events)))
			return
		}
		var pw *tenancy.PartialWrite
		if errors.As(err, &pw) { // some written (a worker's transaction each): retry the rest only
			a.written.Add(float64(len(events) - len(pw.Rest)))
			events = pw.Rest
		}
		a.mu.RLock()
		closing := a.closed
		a.mu.RUnlock()
		if (closing || !open) && attempt >= 3 {
			a.lost.Add(float64(len(events)))
			a.logger.Error("audit records lost: the write failed while shutting down", "records", len(events), "err", err)
			return
		}
		a.logger.Warn("audit write failed; retrying", "records", len(events), "attempt", attempt, "err", err)
		time.Sleep(backoff)
		backoff = min(backoff*2, 5*time.Second)
	}
}

// finish derives what is kept of a call's query: its length and keyed
// hash. Nothing else of the arguments leaves this function.
func (a *auditor) finish(ctx context.Context, r auditRecord) tenancy.AuditEvent {
	ev := r.ev
	if len(r.query) == 0 {
		return ev
	}
	var args struct {
		Query *string `json:"query"`
	}
	if json.Unmarshal(r.query, &args) == nil && args.Query != nil {
		n := int32(utf8.RuneCountInString(*args.Query))
		ev.QueryLength = &n
		if h := a.queryHasher(ctx); h != nil {
			ev.QueryHash = h.Hash(*args.Query)
		}
	}
	return ev
}

// queryHasher reads the key once. While the database does not answer, it
// tries again at most every 10 s (records meanwhile keep the query's
// length only, and one warning says so).
func (a *auditor) queryHasher(ctx context.Context) *tenancy.QueryHasher {
	a.hashMu.Lock()
	defer a.hashMu.Unlock()
	if a.hasher == nil && time.Now().After(a.hashRetry) {
		h, err := a.sink.QueryHasher(ctx)
		if err != nil {
			a.hashRetry = time.Now().Add(10 * time.Second)
			a.logger.Warn("audit: query hash key unavailable; records keep the query's length only until it is read", "err", err)
			return nil
		}
		a.hasher = h
	}
	return a.hasher
}

type idSet struct {
	seen map[uuid.UUID]bool
	list []uuid.UUID
}

func newIDSet() *idSet { return &idSet{list: []uuid.UUID{}} }

func (s *idSet) add(v []byte) {
	if len(s.list) >= maxAuditEntryIDs {
		return
	}
	id, err := uuid.ParseBytes(v)
	if err != nil || s.seen[id] {
		return
	}
	if s.seen == nil {
		s.seen = map[uuid.UUID]bool{}
	}
	s.seen[id] = true
	s.list = append(s.list, id)
}

// idKeys are the keys that name entries in every argument and answer of
// the knowledge tools and resources: a store's id and its similar entries,
// a search's or a list's hits, a supersession's pair, a chain's entries, a
// task's linked entries, forget_knowledge's id, a relation's two ends
// (link_knowledge, unlink_knowledge, list_relations' other entries).
var idKeys = [][]byte{[]byte(`"id"`), []byte(`"oldId"`), []byte(`"newId"`), []byte(`"fromId"`), []byte(`"toId"`), []byte(`"otherId"`)}

// scan adds the string values of idKeys found anywhere in the JSON text b,
// without decoding it. Exact for valid JSON: inside a string every quote
// is escaped, so an unescaped "id" followed by a colon is a key (a body
// holding the text "id": "..." reads \"id\" and is passed over, since
// its quote is preceded by a backslash).
func (s *idSet) scan(b []byte) {
	for _, key := range idKeys {
		rest := b
		for {
			i := bytes.Index(rest, key)
			if i < 0 {
				break
			}
			escaped := i > 0 && rest[i-1] == '\\'
			rest = rest[i+len(key):]
			if escaped {
				continue
			}
			j := 0
			for j < len(rest) && isSpace(rest[j]) {
				j++
			}
			if j >= len(rest) || rest[j] != ':' {
				continue
			}
			j++
			for j < len(rest) && isSpace(rest[j]) {
				j++
			}
			if j+38 <= len(rest) && rest[j] == '"' && rest[j+37] == '"' {
				s.add(rest[j+1 : j+37])
			}
		}
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// auditTool records a tool call (the middleware calls it after the call).
func (s *Server) auditTool(p *tenancy.Principal, name string, req mcp.Request, res mcp.Result, outcome string, start time.Time, d time.Duration) {
	if s.audit == nil {
		return
	}
	r := auditRecord{ev: s.auditEvent(p, tenancy.AuditTool, name, outcome, start, d)}
	ids := newIDSet()
	if cr, ok := req.(*mcp.CallToolRequest); ok && cr.Params != nil {
		ids.scan(cr.Params.Arguments)
		if bytes.Contains(cr.Params.Arguments, []byte(`"query"`)) {
			r.query = bytes.Clone(cr.Params.Arguments)
		}
	}
	if tr, ok := res.(*mcp.CallToolResult); ok && tr != nil && !tr.IsError {
		if raw, ok := tr.StructuredContent.(json.RawMessage); ok {
			ids.scan(raw)
		}
	}
	r.ev.EntryIDs = ids.list
	s.audit.record(r)
}

// auditResource records a resource read.
func (s *Server) auditResource(p *tenancy.Principal, kind, uri string, res mcp.Result, outcome string, start time.Time, d time.Duration) {
	if s.audit == nil {
		return
	}
	r := auditRecord{ev: s.auditEvent(p, tenancy.AuditResource, kind, outcome, start, d)}
	ids := newIDSet()
	if rest, ok := strings.CutPrefix(uri, "knowledge://"); ok && !strings.Contains(rest, "/") {
		ids.add([]byte(rest)) // an id read or tried
	}
	if outcome == "ok" {
		if rr, ok := res.(*mcp.ReadResourceResult); ok && rr != nil && len(rr.Contents) == 1 {
			ids.scan([]byte(rr.Contents[0].Text))
		}
	}
	r.ev.EntryIDs = ids.list
	s.audit.record(r)
}

func (s *Server) auditEvent(p *tenancy.Principal, kind, name, outcome string, start time.Time, d time.Duration) tenancy.AuditEvent {
	agent, token := p.AgentID, p.TokenID
	if outcome == "" {
		outcome = "unknown"
	}
	return tenancy.AuditEvent{OrgID: p.OrgID, At: start, AgentID: &agent, TokenID: &token,
		Kind: kind, Name: name, Outcome: outcome, DurationUs: d.Microseconds()}
}
