// Package stages is the stage clock of MCP calls: where one call's time
// goes, from the moment its request arrives to the moment its answer is
// written, and how many PostgreSQL and Redis round trips it makes. The
// end-to-end benchmark (apps/mcp/bench, docs/benchmarks.md "MCP end to
// end") turns it on with MCP_STAGES_FILE; off, nothing of it runs: the
// server holds a nil *Recorder, every method of a nil Recorder or Clock
// returns at once, and the database and Redis clients carry no hooks.
//
// It times one call at a time. The transport's ends (a request's arrival,
// its answer's write) happen outside any call's context, so the Recorder
// keeps the call between them as its current one: with calls at once the
// figures of different calls would mix, so the benchmark calls one after
// the other, as one agent does.
package stages

import (
	"context"
	"encoding/json"
	"io"
	"sync"
	"time"
)

// Stage is one part of a call's time on the server.
type Stage int

// The stages, in a call's order. Their sum is the server's time of the
// call, from the request's arrival to its answer's write.
const (
	// Transport: the request's reading and JSON-RPC decoding, the go-sdk's
	// dispatch to the gate, less Auth (HTTP: from the handler's start,
	// the body's read and scope check included).
	Transport Stage = iota
	// Auth: the bearer token's verification.
	Auth
	// RateLimit: the rate limits (and what shares their round trip).
	RateLimit
	// Admit: the wait for a database connection slot.
	Admit
	// Decode: the tool's arguments decoded and checked by the edge.
	Decode
	// Idempotence: Redis commands of the store's idempotence keys made
	// while the call runs.
	Idempotence
	// Database: PostgreSQL round trips while the call runs (wall time:
	// statements at once on two connections count once).
	Database
	// RedisOther: other Redis commands while the call runs (the
	// embeddings queue, the query-vector cache), where no statement ran.
	RedisOther
	// Domain: the rest of the tool's run: validation, ranking and fusion,
	// snippets, the duplicate check's arithmetic.
	Domain
	// Encode: the answer marshaled by the tool (its structured content).
	Encode
	// Bookkeeping: the call's audit record, metrics and log line, when
	// they run before the answer.
	Bookkeeping
	// Write: from the gate's return to the answer written: the go-sdk's
	// JSON-RPC encoding and the transport's write.
	Write
	numStages
)

var names = [numStages]string{"transport", "auth", "rate_limit", "admit", "decode", "idempotence", "database",
	"redis_other", "domain", "encode", "audit_metrics", "write"}

func (s Stage) String() string { return names[s] }

// Names are the stages' names, in order.
func Names() []string { return names[:] }

// Kinds of round trip the hooks report.
type Kind int

const (
	KindDB Kind = iota
	KindIdem
	KindRedis
	numKinds
)

// Clock is one call's: the stages' durations and its round trips. Safe for
// concurrent use (a search's statements end on two goroutines).
type Clock struct {
	mu      sync.Mutex
	name    string
	arrive  time.Time
	gateIn  time.Time
	gateOut time.Time
	d       [numStages]time.Duration

	// Wall time spent waiting on each kind of I/O, and on any (union),
	// while the tool ran: overlapping round trips count once.
	inflight  [numKinds + 1]int
	since     [numKinds + 1]time.Time
	wall      [numKinds + 1]time.Duration
	running   bool
	runStart  time.Time
	ran       time.Duration // the tool's run, whole
	trips     [numKinds]int
	after     [numKinds]int // round trips made after the answer was written
	rlTrips   int           // Redis round trips of the rate limit
	parent    *Clock        // an After clock's: whose work after the answer it times
	written   bool
	writtenAt time.Time
}

type clockKey struct{}

// With returns ctx carrying c.
func With(ctx context.Context, c *Clock) context.Context {
	if c == nil {
		return ctx
	}
	return context.WithValue(ctx, clockKey{}, c)
}

// From is the clock of ctx's call, or nil.
func From(ctx context.Context) *Clock {
	c, _ := ctx.Value(clockKey{}).(*Clock)
	return c
}

// Add adds d to stage s.
func (c *Clock) Add(s Stage, d time.Duration) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.d[s] += d
	c.mu.Unlock()
}

// Since adds the time since t to stage s.
func (c *Clock) Since(s Stage, t time.Time) {
	if c == nil {
		return
	}
	c.Add(s, time.Since(t))
}

// Name names the call (the tool, or the resource kind).
func (c *Clock) Name(name string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.name = name
	c.mu.Unlock()
}

// GateIn marks the call's arrival at the gate.
func (c *Clock) GateIn() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.gateIn = time.Now()
	c.mu.Unlock()
}

// GateOut marks the gate's return: what follows is the go-sdk's encoding
// and the write.
func (c *Clock) GateOut() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.gateOut = time.Now()
	c.mu.Unlock()
}

// RunStart and RunEnd bracket the tool's run. The I/O the hooks report
// within it, the arguments' decoding and the answer's encoding come out of
// the run's time, and the rest is the Domain stage; I/O outside it (the
// token's look-up) is counted, its time is its stage's.
func (c *Clock) RunStart() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.running, c.runStart = true, time.Now()
	c.mu.Unlock()
}

// RunEnd: see RunStart.
func (c *Clock) RunEnd() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.running = false
	c.ran += time.Since(c.runStart)
	c.mu.Unlock()
}

// RateLimitTrip counts one Redis round trip of the rate limit (its time is
// the RateLimit stage's).
func (c *Clock) RateLimitTrip() {
	if c == nil {
		return
	}
	if c.parent != nil {
		c.parent.afterTrip(KindRedis)
		return
	}
	c.mu.Lock()
	if c.written {
		c.after[KindRedis]++
	} else {
		c.rlTrips++
	}
	c.mu.Unlock()
}

// After is the clock of c's work after its answer (the queue of work
// the server runs after the answers): its round trips count as c's after
// the answer, however early they start.
func (c *Clock) After() *Clock {
	if c == nil {
		return nil
	}
	return &Clock{parent: c}
}

func (c *Clock) afterTrip(k Kind) {
	c.mu.Lock()
	c.after[k]++
	c.mu.Unlock()
}

// IOStart marks a round trip of kind k starting; IOEnd its end.
func (c *Clock) IOStart(k Kind) {
	if c == nil {
		return
	}
	if c.parent != nil {
		c.parent.afterTrip(k)
		return
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.written {
		c.after[k]++
		return
	}
	c.trips[k]++
	if !c.running {
		return
	}
	for _, i := range []int{int(k), int(numKinds)} {
		if c.inflight[i] == 0 {
			c.since[i] = now
		}
		c.inflight[i]++
	}
}

// IOEnd: see IOStart.
func (c *Clock) IOEnd(k Kind) {
	if c == nil || c.parent != nil {
		return
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, i := range []int{int(k), int(numKinds)} {
		if c.inflight[i] == 0 {
			continue // started after the answer, or before the clock
		}
		c.inflight[i]--
		if c.inflight[i] == 0 {
			c.wall[i] += now.Sub(c.since[i])
		}
	}
}

// Record is one call's figures, as the Recorder writes them (one JSON
// line each).
type Record struct {
	Name string `json:"name"`
	// ServerUs is the server's time of the call, arrival to written.
	ServerUs int64 `json:"server_us"`
	// Us are the stages' times, by name.
	Us map[string]int64 `json:"us"`
	// DBTrips, RedisTrips: the round trips the call waited for or made
	// before its answer was written (the rate limit's included).
	DBTrips    int `json:"db_trips"`
	RedisTrips int `json:"redis_trips"`
	// After: the round trips it made after its answer was written, seen
	// before the next call arrived (audit, queue, the answer's record).
	DBTripsAfter    int `json:"db_trips_after"`
	RedisTripsAfter int `json:"redis_trips_after"`
}

// record closes the clock's figures.
func (c *Clock) record() Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := Record{Name: c.name, Us: make(map[string]int64, numStages)}
	d := c.d
	// The I/O of the tool's run comes out of Domain, which the gate timed
	// whole; what remains of it is the tool's own work.
	dbWall := c.wall[KindDB]
	idemWall := min(c.wall[KindIdem], c.wall[numKinds]-dbWall)
	other := max(0, c.wall[numKinds]-dbWall-idemWall)
	d[Database] += dbWall
	d[Idempotence] += idemWall
	d[RedisOther] += other
	d[Domain] = max(0, c.ran-c.wall[numKinds]-d[Decode]-d[Encode])
	if !c.gateIn.IsZero() && !c.arrive.IsZero() {
		d[Transport] = max(0, c.gateIn.Sub(c.arrive)-d[Auth])
	}
	if !c.gateOut.IsZero() && !c.writtenAt.IsZero() {
		d[Write] = c.writtenAt.Sub(c.gateOut)
	}
	for s := range numStages {
		r.Us[names[s]] = d[s].Microseconds()
	}
	if !c.arrive.IsZero() && !c.writtenAt.IsZero() {
		r.ServerUs = c.writtenAt.Sub(c.arrive).Microseconds()
	}
	r.DBTrips = c.trips[KindDB]
	r.RedisTrips = c.trips[KindIdem] + c.trips[KindRedis] + c.rlTrips
	r.DBTripsAfter = c.after[KindDB]
	r.RedisTripsAfter = c.after[KindIdem] + c.after[KindRedis]
	return r
}

// Recorder holds the current call's clock and writes each call's Record,
// one JSON line, to its writer once the next call arrives (so that what a
// call does after its answer is counted too) or on Close. A nil Recorder
// does nothing.
type Recorder struct {
	mu   sync.Mutex
	cur  *Clock // arrived, not written
	done *Clock // written, not recorded yet
	enc  *json.Encoder
	w    io.Writer
}

// NewRecorder returns a Recorder writing to w.
func NewRecorder(w io.Writer) *Recorder {
	return &Recorder{enc: json.NewEncoder(w), w: w}
}

// Arrive starts the clock of a request that has just arrived.
func (r *Recorder) Arrive() {
	if r == nil {
		return
	}
	c := &Clock{arrive: time.Now()}
	r.mu.Lock()
	prev := r.done
	r.done, r.cur = nil, c
	r.mu.Unlock()
	r.emit(prev)
}

// Current is the clock of the call being served: the request that arrived
// last, or a new clock when none is waiting (a transport that does not
// report arrivals).
func (r *Recorder) Current() *Clock {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur == nil {
		r.cur = &Clock{arrive: time.Now()}
	}
	return r.cur
}

// Written marks the current call's answer written. A write that answers no
// gated call (initialize, a list) closes nothing.
func (r *Recorder) Written() { r.answered(r.answering()) }

// answering takes the current call whose answer is being written: the one
// that passed the gate (a write of any other answers no gated call).
func (r *Recorder) answering() *Clock {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.cur
	if c == nil {
		return nil
	}
	c.mu.Lock()
	gated := !c.gateOut.IsZero()
	c.mu.Unlock()
	if !gated {
		return nil
	}
	r.cur = nil
	// From here what the call does is after its answer, whose bytes are
	// now on their way (the write's end, answered, may come after the
	// client has read them).
	c.mu.Lock()
	c.written = true
	c.mu.Unlock()
	return c
}

// answered marks c's answer written (c from answering: the write may end
// after the client has read it and sent its next call).
func (r *Recorder) answered(c *Clock) {
	if c == nil {
		return
	}
	now := time.Now()
	c.mu.Lock()
	c.writtenAt = now
	c.mu.Unlock()
	r.mu.Lock()
	prev := r.done
	r.done = c
	r.mu.Unlock()
	r.emit(prev)
}

// Close writes the last call's record.
func (r *Recorder) Close() {
	if r == nil {
		return
	}
	r.mu.Lock()
	prev := r.done
	r.done = nil
	r.mu.Unlock()
	r.emit(prev)
	if f, ok := r.w.(interface{ Sync() error }); ok {
		f.Sync()
	}
}

func (r *Recorder) emit(c *Clock) {
	if c == nil || c.name == "" {
		return
	}
	rec := c.record()
	r.mu.Lock()
	r.enc.Encode(rec)
	r.mu.Unlock()
}

// Reader is r marking each request's arrival (a read that returns bytes)
// on rec: stdio's requests come one line at a time.
func Reader(r io.Reader, rec *Recorder) io.Reader {
	if rec == nil {
		return r
	}
	return arrivals{r, rec}
}

type arrivals struct {
	r   io.Reader
	rec *Recorder
}

func (a arrivals) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if n > 0 {
		a.rec.Arrive()
	}
	return n, err
}

// Writer is w marking each answer written on rec.
func Writer(w io.Writer, rec *Recorder) io.Writer {
	if rec == nil {
		return w
	}
	return writes{w, rec}
}

type writes struct {
	w   io.Writer
	rec *Recorder
}

func (a writes) Write(p []byte) (int, error) {
	c := a.rec.answering()
	n, err := a.w.Write(p)
	a.rec.answered(c)
	return n, err
}
