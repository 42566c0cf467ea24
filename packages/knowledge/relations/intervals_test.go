package relations_test

import (
	"sync"
	"testing"
	"time"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
)

// TestRelationIntervalsNeverOverlapUnderContention links and unlinks one
// relation from several agents at once while another transaction keeps
// taking the ends' locks, so links and unlinks queue behind each other: a
// transaction that began before another may take the locks after it. The
// relation's history must still be a sequence of intervals, each starting
// no earlier than the previous one ended, and list_relations as of any
// instant must name it at most once.
func TestRelationIntervalsNeverOverlapUnderContention(t *testing.T) {
	t.Parallel()
	b := setup(t)
	from := b.entry(t, b.alice, "Pump manual", "the pump")
	to := b.entry(t, b.bob, "Pump incident", "it stopped")

	const workers, rounds = 6, 40
	stop := make(chan struct{})
	var holder sync.WaitGroup
	holder.Add(1)
	go func() { // the contention: the ends locked for a moment, again and again
		defer holder.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			tx, err := b.pool.Begin(b.ctx)
			if err != nil {
				t.Error(err)
				return
			}
			// By org and id, as the link's own lock: on a Citus cluster a
			// locking read must name the distribution column.
			if _, err := tx.Exec(b.ctx, "SELECT id FROM knowledge WHERE org_id = $1 AND id = ANY($2) ORDER BY id FOR NO KEY UPDATE", b.org, []any{from, to}); err != nil {
				t.Error(err)
				_ = tx.Rollback(b.ctx)
				return
			}
			time.Sleep(2 * time.Millisecond)
			_ = tx.Rollback(b.ctx)
			time.Sleep(time.Millisecond)
		}
	}()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := b.alice
			if w%2 == 1 {
				c = b.bob
			}
			for i := range rounds {
				var err error
				if (i+w)%2 == 0 {
					_, err = b.Link(c, domain.LinkInput{FromID: from, ToID: to, Type: "DEPENDS_ON"})
				} else {
					_, err = b.Unlink(c, from, to, "DEPENDS_ON")
				}
				if err != nil && errs.CodeOf(err) != errs.CodeNotFound { // unlink before any link
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	holder.Wait()

	if n := b.count(t, "SELECT count(*) FROM knowledge_relations"); n < 2 {
		t.Fatalf("%d intervals: the schedule did not contend", n)
	}
	var overlaps int
	var example string
	err := b.pool.QueryRow(b.ctx, `
		SELECT count(*), coalesce(min(format('[%s, %s) and [%s, %s)', a.valid_from, a.valid_to, c.valid_from, c.valid_to)), '')
		FROM knowledge_relations a
		JOIN knowledge_relations c ON c.org_id = a.org_id AND c.from_id = a.from_id AND c.type = a.type AND c.to_id = a.to_id AND c.id < a.id
		WHERE tstzrange(a.valid_from, a.valid_to) && tstzrange(c.valid_from, c.valid_to)`).Scan(&overlaps, &example)
	if err != nil {
		t.Fatal(err)
	}
	if overlaps > 0 {
		t.Fatalf("%d pairs of the relation's intervals overlap, e.g. %s", overlaps, example)
	}
	// Read back as of every interval's start: the relation at most once.
	// (An interval may be empty, [t, t): an unlink that began before the
	// link it waited for; it holds at no instant.)
	rows, err := b.pool.Query(b.ctx, "SELECT valid_from FROM knowledge_relations")
	if err != nil {
		t.Fatal(err)
	}
	var starts []time.Time
	for rows.Next() {
		var s time.Time
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		starts = append(starts, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, s := range starts {
		if got := b.relations(t, b.alice, domain.RelationsInput{ID: from, AsOf: &s}); len(got) > 1 {
			t.Fatalf("as of %s list_relations names the relation %d times", s, len(got))
		}
	}
}
