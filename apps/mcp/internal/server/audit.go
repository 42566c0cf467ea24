package server

import (
	"context"
	"encoding/json"
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
//   - The call's own goroutine only builds a small record (references to
//     the arguments and result already in memory; no parsing, no hashing)
//     and hands it to a buffered channel without blocking: ~1 us.
//   - One writer goroutine takes records from the channel, and every
//     AuditConfig.FlushInterval, or as soon as AuditConfig.Batch records
//     are waiting, derives what is kept (entry ids from the arguments and
//     the result, the query's length and keyed hash) and writes the batch
//     with one COPY. A failed write is retried (with back-off) until it
//     succeeds or the server shuts down; records keep arriving in the
//     channel meanwhile.
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
	Batch         int           // MCP_AUDIT_BATCH: records a COPY writes at most
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

// auditRecord is what a call hands over: the record without what is
// derived off the request path, and the raw material to derive it from.
type auditRecord struct {
	ev     tenancy.AuditEvent
	args   json.RawMessage // tool arguments as received
	result json.RawMessage // the structured result, or a resource's text
	uri    string          // the resource read
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

	hashMu sync.Mutex
	hasher *tenancy.QueryHasher

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

// finish derives what is kept of a call: the entry ids it touched and, for
// a query, its length and keyed hash. Nothing else of the arguments or the
// result leaves this function.
func (a *auditor) finish(ctx context.Context, r auditRecord) tenancy.AuditEvent {
	ev := r.ev
	ids := newIDSet()
	var args struct {
		ID    *string `json:"id"`
		OldID *string `json:"oldId"`
		NewID *string `json:"newId"`
		Query *string `json:"query"`
	}
	if len(r.args) > 0 && json.Unmarshal(r.args, &args) == nil {
		for _, s := range []*string{args.ID, args.OldID, args.NewID} {
			if s != nil {
				ids.add(*s)
			}
		}
		if args.Query != nil {
			n := int32(utf8.RuneCountInString(*args.Query))
			ev.QueryLength = &n
			if h := a.queryHasher(ctx); h != nil {
				ev.QueryHash = h.Hash(*args.Query)
			}
		}
	}
	if rest, ok := strings.CutPrefix(r.uri, "knowledge://"); ok && !strings.Contains(rest, "/") {
		ids.add(rest)
	}
	if len(r.result) > 0 {
		var v any
		if json.Unmarshal(r.result, &v) == nil {
			ids.walk(v)
		}
	}
	ev.EntryIDs = ids.list
	return ev
}

// queryHasher reads the key once (retried on the next record if the
// database did not answer).
func (a *auditor) queryHasher(ctx context.Context) *tenancy.QueryHasher {
	a.hashMu.Lock()
	defer a.hashMu.Unlock()
	if a.hasher == nil {
		h, err := a.sink.QueryHasher(ctx)
		if err != nil {
			a.logger.Warn("audit: query hash key unavailable; the record keeps the query's length only", "err", err)
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

func newIDSet() *idSet { return &idSet{seen: map[uuid.UUID]bool{}, list: []uuid.UUID{}} }

func (s *idSet) add(v string) {
	if len(s.list) >= maxAuditEntryIDs {
		return
	}
	id, err := uuid.Parse(v)
	if err != nil || s.seen[id] {
		return
	}
	s.seen[id] = true
	s.list = append(s.list, id)
}

// walk collects the values of the keys that name entries in every answer
// of the knowledge tools and resources ("id", "oldId", "newId"), at any
// depth: a store's id and its similar entries, a search's or a list's hits,
// a supersession's pair, a chain's entries, a task's linked entries.
func (s *idSet) walk(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			switch k {
			case "id", "oldId", "newId":
				if str, ok := val.(string); ok {
					s.add(str)
					continue
				}
			}
			s.walk(val)
		}
	case []any:
		for _, e := range x {
			s.walk(e)
		}
	}
}

// auditTool records a tool call (the middleware calls it after the call).
func (s *Server) auditTool(p *tenancy.Principal, name string, req mcp.Request, res mcp.Result, outcome string, start time.Time, d time.Duration) {
	if s.audit == nil {
		return
	}
	r := auditRecord{ev: s.auditEvent(p, tenancy.AuditTool, name, outcome, start, d)}
	if cr, ok := req.(*mcp.CallToolRequest); ok && cr.Params != nil {
		r.args = cr.Params.Arguments
	}
	if tr, ok := res.(*mcp.CallToolResult); ok && tr != nil && !tr.IsError {
		if raw, ok := tr.StructuredContent.(json.RawMessage); ok {
			r.result = raw
		}
	}
	s.audit.record(r)
}

// auditResource records a resource read.
func (s *Server) auditResource(p *tenancy.Principal, kind, uri string, res mcp.Result, outcome string, start time.Time, d time.Duration) {
	if s.audit == nil {
		return
	}
	r := auditRecord{ev: s.auditEvent(p, tenancy.AuditResource, kind, outcome, start, d)}
	r.uri = uri // an id read or tried
	if outcome == "ok" {
		if rr, ok := res.(*mcp.ReadResourceResult); ok && rr != nil && len(rr.Contents) == 1 {
			r.result = json.RawMessage(rr.Contents[0].Text)
		}
	}
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
