package entries_test

import (
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/errs"
)

func TestSupersedeRules(t *testing.T) {
	t.Parallel()
	b := setup(t)
	a := b.store(t, b.alice, "a", "a")
	bb := b.store(t, b.alice, "b", "b")
	c := b.store(t, b.alice, "c", "c")
	bobs := b.store(t, b.bob, "bob's", "bob")
	bobs2 := b.store(t, b.bob, "bob's 2", "bob")
	foreign := b.store(t, b.eve, "eve's", "eve")

	_, err := b.svc.Supersede(b.ctx, b.alice, a, a)
	wantCode(t, err, errs.CodeInvalidArgument, "newId")
	_, err = b.svc.Supersede(b.ctx, b.alice, uuid.Nil, a)
	wantCode(t, err, errs.CodeInvalidArgument, "oldId")
	_, err = b.svc.Supersede(b.ctx, b.alice, uuid.New(), a)
	wantCode(t, err, errs.CodeNotFound, "oldId")
	_, err = b.svc.Supersede(b.ctx, b.alice, a, uuid.New())
	wantCode(t, err, errs.CodeNotFound, "newId")
	// Org isolation: another org's id is just not found, both ways.
	_, err = b.svc.Supersede(b.ctx, b.alice, a, foreign)
	wantCode(t, err, errs.CodeNotFound, "newId")
	_, err = b.svc.Supersede(b.ctx, b.eve, foreign, a)
	wantCode(t, err, errs.CodeNotFound, "newId")
	// Ownership: alice created neither of bob's entries.
	_, err = b.svc.Supersede(b.ctx, b.alice, bobs, bobs2)
	e := wantCode(t, err, errs.CodeForbidden, "")
	if !strings.Contains(e.Message, "knowledge:write_others") {
		t.Fatalf("forbidden must name the future scope: %q", e.Message)
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge WHERE head_id IS NOT NULL"); n != 0 {
		t.Fatal("refused calls wrote")
	}
	// Creating one of the two is enough, either side.
	if _, err := b.svc.Supersede(b.ctx, b.alice, bobs, c); err != nil {
		t.Fatal(err)
	}

	// a by b, then b by c: a's head moves to c.
	r, err := b.svc.Supersede(b.ctx, b.alice, a, bb)
	if err != nil || r.HeadID != bb || r.Moved != 1 {
		t.Fatalf("%+v %v", r, err)
	}
	r, err = b.svc.Supersede(b.ctx, b.alice, bb, c)
	if err != nil || r.HeadID != c || r.Moved != 2 {
		t.Fatalf("%+v %v", r, err)
	}
	ea, _ := b.svc.Get(b.ctx, b.alice, a)
	if *ea.SupersededBy != bb || *ea.HeadID != c || ea.SupersededAt == nil {
		t.Fatalf("a: %+v", ea)
	}
	ec, _ := b.svc.Get(b.ctx, b.alice, c)
	if ec.HeadID != nil || len(ec.Supersedes) != 2 {
		t.Fatalf("c is the head and directly replaced bob's and b: %+v", ec)
	}
	// Idempotent repeat.
	r, err = b.svc.Supersede(b.ctx, b.alice, a, bb)
	if err != nil || !r.AlreadySuperseded || r.HeadID != c {
		t.Fatalf("repeat: %+v %v", r, err)
	}
	// Already superseded by another entry: conflict naming the head.
	d := b.store(t, b.alice, "d", "d")
	_, err = b.svc.Supersede(b.ctx, b.alice, a, d)
	e = wantCode(t, err, errs.CodeConflict, "oldId")
	if !strings.Contains(e.Message, c.String()) {
		t.Fatalf("conflict must name the head %s: %q", c, e.Message)
	}
	// Cycles: c by a (a's head is c), c by b.
	for _, n := range []uuid.UUID{a, bb} {
		_, err = b.svc.Supersede(b.ctx, b.alice, c, n)
		wantCode(t, err, errs.CodeCycle, "newId")
	}
	// Superseding by a superseded entry links to its head.
	r, err = b.svc.Supersede(b.ctx, b.alice, d, a)
	if err != nil || r.HeadID != c {
		t.Fatalf("%+v %v", r, err)
	}
	if n := b.count(t, "SELECT count(*) FROM knowledge_supersessions"); n != 4 {
		t.Fatalf("history has %d edges, want 4", n)
	}
}

// TestSupersedeConcurrentRandom fires random supersessions from many
// goroutines over a small set of entries (so chains overlap constantly), then
// recomputes every head by walking superseded_by and searches for cycles.
// It runs in rounds, each on a fresh small set, because a set soon merges
// into few chains and most calls then end in conflicts; the deterministic
// interleavings are in supersede_race_internal_test.go.
func TestSupersedeConcurrentRandom(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const rounds, entries, workers, attempts = 4, 40, 20, 12
	var (
		mu      sync.Mutex
		okN     int
		refused = map[errs.Code]int{}
	)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	for round := range rounds {
		ids := make([]uuid.UUID, entries)
		for i := range ids {
			c := b.alice
			if i%2 == 1 {
				c = b.bob
			}
			ids[i] = b.store(t, c, "e", "e")
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				rng := rand.New(rand.NewPCG(uint64(round*workers+w), seed))
				c := b.alice
				if w%2 == 1 {
					c = b.bob
				}
				for range attempts {
					o, n := ids[rng.IntN(entries)], ids[rng.IntN(entries)]
					if o == n {
						continue
					}
					r, err := b.svc.Supersede(b.ctx, c, o, n)
					mu.Lock()
					switch code := errs.CodeOf(err); {
					case err == nil && r.AlreadySuperseded:
						refused["repeat"]++
					case err == nil:
						okN++
					case code == errs.CodeConflict || code == errs.CodeCycle || code == errs.CodeForbidden:
						refused[code]++
					default:
						t.Errorf("unexpected: %v", err)
					}
					mu.Unlock()
				}
			}()
		}
		close(start)
		wg.Wait()
	}
	t.Logf("%d supersessions, refused: %v", okN, refused)

	checkChains(t, b) // forget_test.go
	if n := b.count(t, "SELECT count(*) FROM knowledge WHERE org_id = $1 AND superseded_by IS NOT NULL", b.org); n != okN {
		t.Fatalf("%d superseded entries, %d successful calls", n, okN)
	}
}
