package entries

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/search"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// These tests hold supersessions inside their transaction, between the
// checks and the writes (testHookAfterChecks), while another supersession of
// the same org runs, so the interleavings that per-org serialisation exists
// to prevent are forced rather than hoped for.
//
// The hook is a package variable, set once here before any test runs; it
// dispatches on the caller's org, which is unique to each test, so parallel
// tests (and the external tests, which register nothing) do not interfere.

var raceHooks sync.Map // org uuid.UUID -> func(oldID, newID uuid.UUID)

func init() {
	testHookAfterChecks = func(c domain.Caller, oldID, newID uuid.UUID) {
		if f, ok := raceHooks.Load(c.OrgID); ok {
			f.(func(uuid.UUID, uuid.UUID))(oldID, newID)
		}
	}
}

// rendezvousWait bounds how long a held supersession waits for the others.
// Under per-org serialisation the others cannot arrive (they wait for the
// lock the held one owns), so the wait times out and the held one proceeds.
const rendezvousWait = 300 * time.Millisecond

// releaseLag staggers the release of a met rendezvous: the i-th named
// supersession proceeds i*releaseLag after all have arrived, so the first
// has started its writes (and is waiting on a row of the second, if it
// needs one) before the second writes and commits.
const releaseLag = 150 * time.Millisecond

// rendezvous holds the first arrival of each of n named supersessions until
// all n have arrived or rendezvousWait has passed. Retried attempts and
// supersessions it does not name pass straight through.
type rendezvous struct {
	mu   sync.Mutex
	want map[[2]uuid.UUID]bool          // pairs still expected
	lag  map[[2]uuid.UUID]time.Duration // extra hold once all have met
	all  chan struct{}                  // closed when every pair arrived
	wait time.Duration                  // bound of the hold before all arrive
	met  int                            // arrivals that saw every pair arrive in time
}

func newRendezvous(wait time.Duration, pairs ...[2]uuid.UUID) *rendezvous {
	r := &rendezvous{want: map[[2]uuid.UUID]bool{}, lag: map[[2]uuid.UUID]time.Duration{}, all: make(chan struct{}), wait: wait}
	for i, p := range pairs {
		r.want[p] = true
		r.lag[p] = time.Duration(i) * releaseLag
	}
	return r
}

func (r *rendezvous) hook(oldID, newID uuid.UUID) {
	k := [2]uuid.UUID{oldID, newID}
	r.mu.Lock()
	if !r.want[k] {
		r.mu.Unlock()
		return
	}
	delete(r.want, k)
	lag := r.lag[k]
	if len(r.want) == 0 {
		close(r.all)
	}
	r.mu.Unlock()
	select {
	case <-r.all:
		r.mu.Lock()
		r.met++
		r.mu.Unlock()
		time.Sleep(lag)
	case <-time.After(r.wait):
	}
}

// overlapped reports whether the supersessions were inside their
// transactions, past the checks, at the same time.
func (r *rendezvous) overlapped() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.met > 1
}

// newTestEntries returns Entries on pool with the default search.
func newTestEntries(pool *pgxpool.Pool, o Options) *Entries {
	d := data.New(pool)
	if o.Search == nil {
		o.Search = search.New(d, search.Options{})
	}
	return New(d, o)
}

type raceEnv struct {
	ctx   context.Context
	pool  *pgxpool.Pool
	svc   *Entries
	org   uuid.UUID
	agent domain.Caller
}

func newRaceEnv(t *testing.T) *raceEnv {
	t.Helper()
	db := testenv.Postgres(t)
	e := &raceEnv{ctx: context.Background(), pool: db.Pool, svc: newTestEntries(db.Pool, Options{})}
	a := testfactory.Agent(e.ctx, t, e.pool, nil)
	e.org, e.agent = a.OrgID, domain.Caller{OrgID: a.OrgID, AgentID: a.ID}
	t.Cleanup(func() { raceHooks.Delete(e.org) })
	return e
}

func (e *raceEnv) entries(t *testing.T, c domain.Caller, n int) []uuid.UUID {
	t.Helper()
	ids := make([]uuid.UUID, n)
	for i := range ids {
		r, err := e.svc.Store(data.AsOrg(e.ctx, c.OrgID), c, domain.StoreInput{Title: "e", Body: "e"})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = r.ID
	}
	return ids
}

func (e *raceEnv) supersede(t *testing.T, c domain.Caller, oldID, newID uuid.UUID) {
	t.Helper()
	if _, err := e.svc.Supersede(data.AsOrg(e.ctx, c.OrgID), c, oldID, newID); err != nil {
		t.Fatal(err)
	}
}

// concurrently runs the supersessions of pairs at once, each held after
// its checks until all have reached that point (or the bounded wait ends),
// then released in the order of pairs, and returns their errors in that
// order.
func (e *raceEnv) concurrently(t *testing.T, c domain.Caller, pairs ...[2]uuid.UUID) ([]error, *rendezvous) {
	t.Helper()
	return e.held(t, c, newRendezvous(rendezvousWait, pairs...), pairs...)
}

// held is concurrently with a given rendezvous.
func (e *raceEnv) held(t *testing.T, c domain.Caller, rv *rendezvous, pairs ...[2]uuid.UUID) ([]error, *rendezvous) {
	t.Helper()
	raceHooks.Store(c.OrgID, rv.hook)
	defer raceHooks.Delete(c.OrgID)
	errs := make([]error, len(pairs))
	var wg sync.WaitGroup
	for i, p := range pairs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = e.svc.Supersede(data.AsOrg(e.ctx, c.OrgID), c, p[0], p[1])
		}()
	}
	wg.Wait()
	return errs, rv
}

// pair races p and q (released in that order, or q first if swap) and
// returns their errors in the order p, q.
func (e *raceEnv) pair(t *testing.T, swap bool, p, q [2]uuid.UUID) []error {
	t.Helper()
	if !swap {
		errs, _ := e.concurrently(t, e.agent, p, q)
		return errs
	}
	errs, _ := e.concurrently(t, e.agent, q, p)
	return []error{errs[1], errs[0]}
}

// checkChains recomputes every head of the org by walking superseded_by and
// fails on a cycle, a head with a cached head, a superseded entry whose
// cached head is not its walked head, or history that disagrees with the
// direct edges.
func (e *raceEnv) checkChains(t *testing.T, org uuid.UUID) map[uuid.UUID]uuid.UUID {
	t.Helper()
	type row struct{ by, head *uuid.UUID }
	state := map[uuid.UUID]row{}
	rows, err := e.pool.Query(e.ctx, "SELECT id, superseded_by, head_id FROM knowledge WHERE org_id = $1", org)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id uuid.UUID
		var r row
		if err := rows.Scan(&id, &r.by, &r.head); err != nil {
			t.Fatal(err)
		}
		state[id] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	heads := map[uuid.UUID]uuid.UUID{}
	superseded := 0
	for id, r := range state {
		cur := id
		for steps := 0; state[cur].by != nil; steps++ {
			if steps > len(state) {
				t.Fatalf("cycle through %s", id)
			}
			cur = *state[cur].by
		}
		heads[id] = cur
		if cur == id {
			if r.head != nil {
				t.Errorf("head %s has cached head %s", id, *r.head)
			}
			continue
		}
		superseded++
		if r.head == nil || *r.head != cur {
			t.Errorf("entry %s: cached head %v, walked head %s (stale cache)", id, r.head, cur)
		}
	}
	var edges int
	if err := e.pool.QueryRow(e.ctx, `SELECT count(*) FROM knowledge k JOIN knowledge_supersessions s
		ON s.org_id = k.org_id AND s.old_id = k.id AND s.new_id = k.superseded_by WHERE k.org_id = $1`, org).Scan(&edges); err != nil {
		t.Fatal(err)
	}
	if edges != superseded {
		t.Errorf("%d history edges for %d superseded entries", edges, superseded)
	}
	if t.Failed() {
		t.FailNow()
	}
	return heads
}

func codeOf(err error) errs.Code {
	var e *errs.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// TestSupersedeRaceTwoChainCycle: chains C -> A and B -> H. A by B alone is
// fine (head(B) = H), H by C alone is fine (head(C) = A); together they
// close the loop A -> B -> H -> C -> A. Both are held after their checks
// until the other has checked too: exactly one may succeed, the other must
// be refused as a cycle.
func TestSupersedeRaceTwoChainCycle(t *testing.T) {
	t.Parallel()
	e := newRaceEnv(t)
	for i := range 4 { // independent quadruples, each raced once, released in both orders
		ids := e.entries(t, e.agent, 4)
		a, b, c, h := ids[0], ids[1], ids[2], ids[3]
		e.supersede(t, e.agent, c, a)
		e.supersede(t, e.agent, b, h)
		got := e.pair(t, i%2 == 1, [2]uuid.UUID{a, b}, [2]uuid.UUID{h, c})
		ok, cycles := 0, 0
		for _, err := range got {
			switch {
			case err == nil:
				ok++
			case codeOf(err) == errs.CodeCycle:
				cycles++
			default:
				t.Fatalf("unexpected error: %v", err)
			}
		}
		if ok != 1 || cycles != 1 {
			t.Fatalf("A by B: %v; H by C: %v; want exactly one success and one cycle refusal", got[0], got[1])
		}
		heads := e.checkChains(t, e.org)
		want := h // A by B won: C -> A -> B -> H
		if got[0] != nil {
			want = a // H by C won: B -> H -> C -> A
		}
		for _, id := range ids {
			if heads[id] != want {
				t.Fatalf("%s: head %s, want %s", id, heads[id], want)
			}
		}
	}
}

// TestSupersedeRaceStaleHead: chain B -> H. A by B links A to head(B) = H
// while H by D moves every entry whose head is H to D. In either order A's
// cached head must end as D; if H by D moved "every entry whose head is H"
// without seeing A, A would keep the stale head H. The harmful order is
// forced on even rounds: H by D starts its moving UPDATE (whose snapshot has
// no A under H, and which waits for B, locked by A by B) before A by B
// writes and commits.
func TestSupersedeRaceStaleHead(t *testing.T) {
	t.Parallel()
	e := newRaceEnv(t)
	for i := range 4 {
		ids := e.entries(t, e.agent, 4)
		a, b, h, d := ids[0], ids[1], ids[2], ids[3]
		e.supersede(t, e.agent, b, h)
		errs := e.pair(t, i%2 == 1, [2]uuid.UUID{h, d}, [2]uuid.UUID{a, b})
		for _, err := range errs {
			if err != nil {
				t.Fatalf("both supersessions are valid in either order: %v", errs)
			}
		}
		heads := e.checkChains(t, e.org)
		for _, id := range []uuid.UUID{a, b, h} {
			if heads[id] != d {
				t.Fatalf("%s: walked head %s, want %s", id, heads[id], d)
			}
		}
	}
}

// TestSupersedeRaceMovedMember: chain C -> A. A by B moves C (head A) to B,
// while X by C links X to head(C) = A. X must end under B like C, never with
// the superseded A as its cached head. The harmful order is forced on even
// rounds: A by B starts moving (its snapshot has no X under A; it waits for
// C, locked by X by C) before X by C writes and commits.
func TestSupersedeRaceMovedMember(t *testing.T) {
	t.Parallel()
	e := newRaceEnv(t)
	for i := range 4 {
		ids := e.entries(t, e.agent, 4)
		a, b, c, x := ids[0], ids[1], ids[2], ids[3]
		e.supersede(t, e.agent, c, a)
		errs := e.pair(t, i%2 == 1, [2]uuid.UUID{a, b}, [2]uuid.UUID{x, c})
		for _, err := range errs {
			if err != nil {
				t.Fatalf("both supersessions are valid in either order: %v", errs)
			}
		}
		heads := e.checkChains(t, e.org)
		for _, id := range []uuid.UUID{a, c, x} {
			if heads[id] != b {
				t.Fatalf("%s: walked head %s, want %s", id, heads[id], b)
			}
		}
	}
}

// TestSupersedeRaceThreeChainCycle: three chains in a ring,
// X1 -> Y1, X2 -> Y2, X3 -> Y3, then Y1 by X2, Y2 by X3, Y3 by X1 at once.
// Any two are fine together, all three make a loop: at least one must be
// refused as a cycle and the end state must be consistent.
func TestSupersedeRaceThreeChainCycle(t *testing.T) {
	t.Parallel()
	e := newRaceEnv(t)
	ids := e.entries(t, e.agent, 6)
	x, y := ids[:3], ids[3:]
	for i := range 3 {
		e.supersede(t, e.agent, x[i], y[i])
	}
	got, _ := e.concurrently(t, e.agent,
		[2]uuid.UUID{y[0], x[1]}, [2]uuid.UUID{y[1], x[2]}, [2]uuid.UUID{y[2], x[0]})
	ok := 0
	for _, err := range got {
		switch {
		case err == nil:
			ok++
		case codeOf(err) == errs.CodeCycle:
		default:
			t.Fatalf("unexpected error: %v", err)
		}
	}
	if ok != 2 {
		t.Fatalf("want two successes and one cycle refusal: %v", got)
	}
	e.checkChains(t, e.org)
}

// TestSupersedeSerialisedPerOrg checks the mechanism the doc comment of
// Supersede promises: two supersessions of one org, on unrelated entries,
// are never past their checks at the same time; the same two in different
// orgs are (the serialisation is per org, not global).
func TestSupersedeSerialisedPerOrg(t *testing.T) {
	t.Parallel()
	e := newRaceEnv(t)
	ids := e.entries(t, e.agent, 4)
	// A longer bound than the scenario tests': it is what the held one
	// waits under serialisation, and what the other may take to arrive
	// without it on a loaded machine.
	p, q := [2]uuid.UUID{ids[0], ids[1]}, [2]uuid.UUID{ids[2], ids[3]}
	errs, rv := e.held(t, e.agent, newRendezvous(time.Second, p, q), p, q)
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	if rv.overlapped() {
		t.Fatal("two supersessions of one org were inside their transactions at once: the per-org serialisation is gone")
	}
	e.checkChains(t, e.org)

	// Two orgs: each supersession registers under its own org, both held
	// by one shared rendezvous.
	oa := testfactory.Agent(e.ctx, t, e.pool, nil)
	other := domain.Caller{OrgID: oa.OrgID, AgentID: oa.ID}
	t.Cleanup(func() { raceHooks.Delete(other.OrgID) })
	mine, theirs := e.entries(t, e.agent, 2), e.entries(t, other, 2)
	// Nothing serialises these, so a generous bound only matters on a
	// loaded machine.
	rv = newRendezvous(10*time.Second, [2]uuid.UUID{mine[0], mine[1]}, [2]uuid.UUID{theirs[0], theirs[1]})
	raceHooks.Store(e.org, rv.hook)
	raceHooks.Store(other.OrgID, rv.hook)
	var wg sync.WaitGroup
	for _, p := range []struct {
		c    domain.Caller
		o, n uuid.UUID
	}{{e.agent, mine[0], mine[1]}, {other, theirs[0], theirs[1]}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := e.svc.Supersede(data.AsOrg(e.ctx, p.c.OrgID), p.c, p.o, p.n); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if !rv.overlapped() {
		t.Fatal("supersessions of two different orgs waited for each other")
	}
}
