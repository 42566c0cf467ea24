package knowledge_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// The invariants test: a seeded random schedule of every write an agent
// or an operator makes (store, supersede, correct, forget, link, unlink,
// store_document replacements, uploads, purge), several agents at once in
// each round, and after every round the invariants checked in SQL and
// through the reads. The schedule (which agent does what, on which
// entries) follows from the seed and the round; how the agents' calls
// interleave inside a round is up to the machine, so a failing seed
// replays the same schedule, not the same interleaving.
//
//	KNOWLEDGE_INVARIANT_ROUNDS  rounds (default 100; CI runs 200), shared
//	                            by the worlds
//	KNOWLEDGE_INVARIANT_SEED    the seed (default: from the clock; printed);
//	                            given, one world replays it
//	KNOWLEDGE_INVARIANT_BUDGET  the wall time each world's rounds may take
//	                            (a Go duration; default 50s for the default
//	                            rounds, so go test work stays bounded on
//	                            a loaded machine; unbounded when ROUNDS
//	                            is set)
//
// The rounds run in invWorlds worlds at once (seeds seed, seed+1, ...), each
// a database of its own: a round waits on locks and round trips more than
// on the CPU, so more worlds do more rounds in the same time, and a smaller
// world's checks (which read the whole org after every round) cost less.
const (
	invWorlds      = 4 // worlds at once, each its own database and seed
	invAgents      = 4 // agents writing at once in a round
	invOpsPerAgent = 2 // calls of each agent in a round
	invSources     = 2 // document sources the replacements contend on
	invHeadings    = 5 // headings a document's sections come from
)

var invRelationTypes = []string{"RELATES_TO", "DEPENDS_ON", "FIXES"}

func TestInvariantsUnderRandomInterleavings(t *testing.T) {
	t.Parallel()
	rounds, budget := 100, 50*time.Second
	if v := os.Getenv("KNOWLEDGE_INVARIANT_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("KNOWLEDGE_INVARIANT_ROUNDS=%q: want a positive number", v)
		}
		rounds, budget = n, 0
	}
	if v := os.Getenv("KNOWLEDGE_INVARIANT_BUDGET"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("KNOWLEDGE_INVARIANT_BUDGET=%q: %v", v, err)
		}
		budget = d
	}
	seed, worlds := uint64(time.Now().UnixNano()), invWorlds
	if v := os.Getenv("KNOWLEDGE_INVARIANT_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("KNOWLEDGE_INVARIANT_SEED=%q: %v", v, err)
		}
		seed, worlds = n, 1
	}
	for i := range worlds {
		s, n := seed+uint64(i), rounds/worlds
		if i < rounds%worlds {
			n++
		}
		t.Run(fmt.Sprintf("seed=%d", s), func(t *testing.T) {
			t.Parallel()
			invariantRounds(t, s, n, budget)
		})
	}
}

// invariantRounds runs rounds rounds of the world of seed within budget (0:
// none), checking the invariants after each.
func invariantRounds(t *testing.T, seed uint64, rounds int, budget time.Duration) {
	w := newInvWorld(t, seed)
	start := time.Now()
	done := 0
	var inChecks time.Duration
	for r := range rounds {
		if budget > 0 && time.Since(start) > budget {
			break
		}
		w.round(r)
		if t.Failed() {
			break
		}
		t0 := time.Now()
		w.check(r)
		inChecks += time.Since(t0)
		if t.Failed() {
			break
		}
		done++
		if done%500 == 0 {
			// A long run (KNOWLEDGE_INVARIANT_ROUNDS) says how far it is.
			t.Logf("seed %d: %d rounds in %s, 0 violations", seed, done, time.Since(start).Round(time.Second))
		}
	}
	if t.Failed() {
		t.Logf("replay: KNOWLEDGE_INVARIANT_SEED=%d KNOWLEDGE_INVARIANT_ROUNDS=%d go test -run TestInvariantsUnderRandomInterleavings ./packages/knowledge", seed, done+1)
		return
	}
	w.checkExport()
	if done < rounds {
		t.Logf("the budget of %s ran out after %d of %d rounds", budget, done, rounds)
	}
	t.Logf("the checks took %s of it", inChecks.Round(time.Millisecond))
	t.Logf("seed %d: %d rounds of %d agents (%d calls each) in %s, 0 violations (%s)", seed, done, invAgents, invOpsPerAgent, time.Since(start).Round(time.Millisecond), w.tally())
}

// invWorld is the test's org, its agents and what the schedule knows: the
// ids it wrote (the targets of later calls) and what was forgotten.
type invWorld struct {
	t      *testing.T
	seed   uint64
	ctx    context.Context
	pool   *pgxpool.Pool // the owner's: the checks read every row
	svc    *knowledge.Service
	ops    *knowledge.Service
	org    uuid.UUID
	agents []knowledge.Caller

	mu        sync.Mutex
	ids       []uuid.UUID           // entries the schedule may name (some gone since)
	linked    []knowledge.LinkInput // relations linked (some unlinked or gone since)
	words     map[uuid.UUID]string  // the unique word of each entry stored by Store or Correct
	forgotten map[uuid.UUID]bool    // checked already: unreachable
	calls     map[string]int        // calls made, by operation
	refused   map[string]int        // calls answered with an error of the vocabulary
}

func newInvWorld(t *testing.T, seed uint64) *invWorld {
	ctx := context.Background()
	db := testenv.Postgres(t)
	r := testenv.LeaseRedis(t)
	o := knowledge.Options{Redis: r.Client, Testing: knowledge.TestingKnobs{SimilarBudget: time.Minute}}
	w := &invWorld{t: t, seed: seed, ctx: ctx, pool: db.Pool,
		svc: knowledge.New(db.AppPool(t), o), ops: knowledge.New(db.Pool, o),
		words: map[uuid.UUID]string{}, forgotten: map[uuid.UUID]bool{}, calls: map[string]int{}, refused: map[string]int{}}
	w.org = testfactory.Org(ctx, t, db.Pool, &testfactory.OrgOpts{Name: "invariants"}).ID
	for i := range invAgents {
		id := testfactory.Agent(ctx, t, db.Pool, &testfactory.AgentOpts{OrgID: w.org, Name: fmt.Sprintf("agent-%d", i)}).ID
		w.agents = append(w.agents, knowledge.Caller{OrgID: w.org, AgentID: id})
	}
	return w
}

func (w *invWorld) tally() string {
	var parts []string
	for op, n := range w.calls {
		parts = append(parts, fmt.Sprintf("%s %d/%d refused", op, n, w.refused[op]))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// round runs every agent's calls of round r at once. Each agent's calls
// follow from (seed, r, agent) alone.
func (w *invWorld) round(r int) {
	var wg sync.WaitGroup
	for a, c := range w.agents {
		rng := rand.New(rand.NewPCG(w.seed, uint64(r)<<8|uint64(a)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range invOpsPerAgent {
				w.step(r, rng, c)
			}
		}()
	}
	wg.Wait()
}

// pick is one of the known ids (uuid.Nil when none).
func (w *invWorld) pick(rng *rand.Rand) uuid.UUID {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pickLocked(rng)
}

func (w *invWorld) pickLocked(rng *rand.Rand) uuid.UUID {
	if len(w.ids) == 0 {
		return uuid.Nil
	}
	// The newest entries are the likeliest targets, as for agents.
	n := len(w.ids)
	i := n - 1 - min(n-1, int(rng.ExpFloat64()*8))
	return w.ids[i]
}

func (w *invWorld) remember(word string, ids ...uuid.UUID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range ids {
		if id != uuid.Nil {
			w.ids = append(w.ids, id)
			if word != "" {
				w.words[id] = word
			}
		}
	}
}

// outcome counts a call and fails the test on an error outside the
// vocabulary's refusals (an internal error, a lost connection).
func (w *invWorld) outcome(op string, err error) {
	w.mu.Lock()
	w.calls[op]++
	if err != nil {
		w.refused[op]++
	}
	w.mu.Unlock()
	if err == nil {
		return
	}
	var e *errs.Error
	if !errors.As(err, &e) {
		w.t.Errorf("seed %d: %s: an error outside the vocabulary: %v", w.seed, op, err)
		return
	}
	switch e.Code {
	case errs.CodeConflict:
		// A conflict names what is in the way (a unique key the database
		// refused, mapped without it, names nothing).
		if e.Field == "" {
			w.t.Errorf("seed %d: %s: a conflict naming no field: %v", w.seed, op, err)
		}
	case errs.CodeNotFound, errs.CodeCycle, errs.CodeForbidden, errs.CodeInvalidArgument:
	default:
		w.t.Errorf("seed %d: %s: %v (code %s)", w.seed, op, err, e.Code)
	}
}

func (w *invWorld) step(r int, rng *rand.Rand, c knowledge.Caller) {
	word := fmt.Sprintf("w%dx%d", r, rng.Uint32())
	switch p := rng.IntN(100); {
	case p < 18:
		res, err := w.svc.Store(w.ctx, c, knowledge.StoreInput{Title: "Note " + word, Body: word + " about the pump and its valves", Tags: []string{"inv"}})
		w.outcome("store", err)
		if err == nil {
			w.remember(word, res.ID)
		}
	case p < 28:
		old, nw := w.pick(rng), w.pick(rng)
		if old == nw {
			return
		}
		_, err := w.svc.Supersede(w.ctx, c, old, nw)
		w.outcome("supersede", err)
	case p < 36:
		old := w.pick(rng)
		res, err := w.svc.Correct(w.ctx, c, old, knowledge.StoreInput{Title: "Correction " + word, Body: word + " corrected pump text", Tags: []string{"inv"}})
		w.outcome("correct", err)
		if err == nil && res.Stored != nil {
			w.remember(word, res.Stored.ID)
		}
	case p < 46:
		_, err := w.svc.Forget(w.ctx, c, w.pick(rng), "invariants", rng.IntN(2) == 0)
		w.outcome("forget", err)
	case p < 58:
		from, to := w.pick(rng), w.pick(rng)
		if from == to {
			return
		}
		in := knowledge.LinkInput{FromID: from, ToID: to, Type: invRelationTypes[rng.IntN(len(invRelationTypes))]}
		_, err := w.svc.Link(w.ctx, c, in)
		w.outcome("link", err)
		if err == nil {
			w.mu.Lock()
			w.linked = append(w.linked, in)
			w.mu.Unlock()
		}
	case p < 66:
		// A relation linked before (one of the newest), else a random one.
		w.mu.Lock()
		in := knowledge.LinkInput{FromID: w.pickLocked(rng), ToID: w.pickLocked(rng), Type: invRelationTypes[rng.IntN(len(invRelationTypes))]}
		if n := len(w.linked); n > 0 && rng.IntN(4) > 0 {
			in = w.linked[n-1-min(n-1, int(rng.ExpFloat64()*8))]
		}
		w.mu.Unlock()
		if in.FromID == in.ToID {
			return
		}
		_, err := w.svc.Unlink(w.ctx, c, in.FromID, in.ToID, in.Type)
		w.outcome("unlink", err)
	case p < 86:
		res, err := w.svc.StoreDocument(w.ctx, c, knowledge.DocumentInput{Title: "Pump manual", Source: invSource(rng), Content: invDocument(rng), Format: "markdown"})
		w.outcome("store_document", err)
		if err == nil {
			w.rememberDocument(res)
		}
	case p < 94:
		w.upload(rng, c)
	case p < 99:
		_, err := w.ops.Operations().Purge(w.ctx, w.org, knowledge.PurgeScope{Entry: w.pick(rng)}, false)
		w.outcome("purge", err)
	default:
		// The operator's purge of an agent's every entry (ctl purge --agent).
		_, err := w.ops.Operations().Purge(w.ctx, w.org, knowledge.PurgeScope{Agent: w.agents[rng.IntN(len(w.agents))].AgentID}, false)
		w.outcome("purge_agent", err)
	}
}

func (w *invWorld) rememberDocument(res *knowledge.DocumentResult) {
	ids := []uuid.UUID{res.ID}
	for _, s := range res.Sections {
		ids = append(ids, s.ID)
	}
	w.remember("", ids...)
}

func invSource(rng *rand.Rand) string { return fmt.Sprintf("manuals/pump-%d.md", rng.IntN(invSources)) }

// invDocument is a document of some of the headings, each in one of three
// versions: a replacement keeps, changes, adds and removes sections.
func invDocument(rng *rand.Rand) string {
	var b strings.Builder
	b.WriteString("# Pump manual\n\n")
	n := 0
	for h := range invHeadings {
		if rng.IntN(4) == 0 {
			continue
		}
		n++
		fmt.Fprintf(&b, "## Pump part %d\n\nVersion %d of part %d: open the valve %d turns, then check the gauge.\n\n", h, rng.IntN(3), h, rng.IntN(3)+1)
	}
	if n == 0 {
		b.WriteString("## Pump part 0\n\nVersion 0 of part 0.\n\n")
	}
	return b.String()
}

// upload sends a document in parts, out of order, and finishes it, at
// times twice.
func (w *invWorld) upload(rng *rand.Rand, c knowledge.Caller) {
	content := invDocument(rng)
	cut := len(content) / 2
	for cut < len(content) && content[cut]&0xC0 == 0x80 {
		cut++
	}
	parts := []string{content[:cut], content[cut:]}
	st, err := w.svc.UploadStart(w.ctx, c, knowledge.UploadStartInput{Title: "Pump manual", Source: invSource(rng), Format: "markdown", TotalBytes: int64(len(content))})
	w.outcome("upload_start", err)
	if err != nil {
		return
	}
	// At times the second part first (refused: parts come in order), then
	// the parts in order.
	if rng.IntN(2) == 0 {
		i := 1
		_, err := w.svc.UploadAppend(w.ctx, c, knowledge.UploadAppendInput{UploadID: st.UploadID, Index: &i, Content: parts[i]})
		w.outcome("upload_append", err)
	}
	for i := range parts {
		_, err := w.svc.UploadAppend(w.ctx, c, knowledge.UploadAppendInput{UploadID: st.UploadID, Index: &i, Content: parts[i]})
		w.outcome("upload_append", err)
		if err != nil {
			return
		}
	}
	for range 1 + rng.IntN(2) {
		res, err := w.svc.UploadFinish(w.ctx, c, knowledge.UploadFinishInput{UploadID: st.UploadID})
		w.outcome("upload_finish", err)
		if err == nil {
			w.rememberDocument(res)
		}
	}
}

// invariantSQL are the invariants as statements that count violations and
// name one example; each must count 0 after every round.
var invariantSQL = []struct{ name, sql string }{
	{"a superseded entry has a successor and a head, a head neither", `
		SELECT count(*), min(id::text) FROM knowledge
		WHERE org_id = $1 AND (superseded_by IS NULL) <> (head_id IS NULL)`},
	{"at most one live head per chain: a chain's head is a head", `
		SELECT count(*), min(k.id::text) FROM knowledge k
		JOIN knowledge h ON h.org_id = k.org_id AND h.id = k.head_id
		WHERE k.org_id = $1 AND h.head_id IS NOT NULL`},
	{"no live entry with a successor (a recorded supersession's old entry is superseded)", `
		SELECT count(*), min(k.id::text) FROM knowledge_supersessions s
		JOIN knowledge k ON k.org_id = s.org_id AND k.id = s.old_id
		WHERE s.org_id = $1 AND k.head_id IS NULL`},
	{"an entry is superseded no earlier than it was made", `
		SELECT count(*), min(id::text) FROM knowledge
		WHERE org_id = $1 AND superseded_at < created_at`},
	{"a document's current section is a live head", `
		SELECT count(*), min(s.id::text) FROM knowledge_sections s
		JOIN knowledge k ON k.org_id = s.org_id AND k.id = s.id
		JOIN knowledge_documents d ON d.org_id = s.org_id AND d.id = s.document_id
		WHERE s.org_id = $1 AND d.live AND s.ended_at IS NULL
		  AND (k.head_id IS NOT NULL OR k.expires_at <= now())`},
	{"a live document's own entry is a live head (a call does not supersede it)", `
		SELECT count(*), min(d.id::text) FROM knowledge_documents d
		JOIN knowledge k ON k.org_id = d.org_id AND k.id = d.id
		WHERE d.org_id = $1 AND d.live AND (k.head_id IS NOT NULL OR k.expires_at <= now())`},
	{"a document no longer live has no current section", `
		SELECT count(*), min(s.id::text) FROM knowledge_sections s
		JOIN knowledge_documents d ON d.org_id = s.org_id AND d.id = s.document_id
		WHERE s.org_id = $1 AND NOT d.live AND s.ended_at IS NULL`},
	{"a section ended (changed, retired) never is a live head again", `
		SELECT count(*), min(s.id::text || ' ' || s.ended_how) FROM knowledge_sections s
		JOIN knowledge k ON k.org_id = s.org_id AND k.id = s.id
		WHERE s.org_id = $1 AND s.ended_at IS NOT NULL
		  AND k.head_id IS NULL AND (k.expires_at IS NULL OR k.expires_at > now())`},
	{"a section ends no earlier than it was made", `
		SELECT count(*), min(s.id::text) FROM knowledge_sections s
		JOIN knowledge k ON k.org_id = s.org_id AND k.id = s.id
		WHERE s.org_id = $1 AND s.ended_at < k.created_at`},
	{"a heading's sections of one source follow each other in time", `
		SELECT count(*), min(x.id::text) FROM (
			SELECT s.id, k.created_at AS starts,
			       max(coalesce(s.ended_at, 'infinity')) OVER (PARTITION BY d.source, s.heading_path ORDER BY k.created_at, s.id
			                                                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before_ends
			FROM knowledge_sections s
			JOIN knowledge_documents d ON d.org_id = s.org_id AND d.id = s.document_id
			JOIN knowledge k ON k.org_id = s.org_id AND k.id = s.id
			WHERE s.org_id = $1 AND d.source IS NOT NULL
			  AND (s.ended_at IS NULL OR s.ended_at > k.created_at)) x -- an empty interval holds at no instant
		WHERE x.before_ends > x.starts`},
	{"at most one live document per source", `
		SELECT count(*), min(source) FROM (
			SELECT source FROM knowledge_documents WHERE org_id = $1 AND live AND source IS NOT NULL
			GROUP BY source HAVING count(*) > 1) x`},
	{"a current section is PART_OF its document, and only a current one", `
		SELECT count(*), min(coalesce(s.id, r.from_id)::text) FROM
		(SELECT id, document_id FROM knowledge_sections WHERE org_id = $1 AND ended_at IS NULL) s
		FULL JOIN (SELECT r.from_id, r.to_id FROM knowledge_relations r
		           JOIN knowledge_documents d ON d.org_id = r.org_id AND d.id = r.to_id
		           WHERE r.org_id = $1 AND r.type = 'PART_OF' AND r.valid_to IS NULL) r
		  ON r.from_id = s.id AND r.to_id = s.document_id
		WHERE s.id IS NULL OR r.from_id IS NULL`},
	{"at most one open relation per (from, type, to)", `
		SELECT count(*), min(from_id::text) FROM (
			SELECT from_id FROM knowledge_relations WHERE org_id = $1 AND valid_to IS NULL
			GROUP BY from_id, type, to_id HAVING count(*) > 1) x`},
	{"no two intervals of one relation overlap", `
		SELECT count(*), min(a.id::text) FROM knowledge_relations a
		JOIN knowledge_relations b ON b.org_id = a.org_id AND b.from_id = a.from_id AND b.type = a.type AND b.to_id = a.to_id AND b.id < a.id
		WHERE a.org_id = $1 AND tstzrange(a.valid_from, a.valid_to) && tstzrange(b.valid_from, b.valid_to)`},
	{"a relation's ends are entries (forgotten ones take theirs along)", `
		SELECT count(*), min(r.id::text) FROM knowledge_relations r
		WHERE r.org_id = $1 AND (NOT EXISTS (SELECT 1 FROM knowledge k WHERE k.org_id = r.org_id AND k.id = r.from_id)
		                      OR NOT EXISTS (SELECT 1 FROM knowledge k WHERE k.org_id = r.org_id AND k.id = r.to_id))`},
	{"nothing of a forgotten entry is stored", `
		SELECT count(*), min(t.id::text) FROM knowledge_tombstones t
		WHERE t.org_id = $1 AND (EXISTS (SELECT 1 FROM knowledge k WHERE k.org_id = t.org_id AND k.id = t.id)
		                      OR EXISTS (SELECT 1 FROM knowledge_supersessions s WHERE s.org_id = t.org_id AND (s.old_id = t.id OR s.new_id = t.id))
		                      OR EXISTS (SELECT 1 FROM knowledge_sections s WHERE s.org_id = t.org_id AND s.id = t.id))`},
}

// invariantsQuery is invariantSQL's statements as one, each row the
// statement's index, count and example.
var invariantsQuery = func() string {
	parts := make([]string, len(invariantSQL))
	for i, inv := range invariantSQL {
		parts[i] = fmt.Sprintf("SELECT %d AS i, x.* FROM (%s) x", i, inv.sql)
	}
	return strings.Join(parts, "\nUNION ALL\n")
}()

func (w *invWorld) check(r int) {
	t := w.t
	// One statement for all of them: a round trip each would make the
	// checks most of the test's time. Without nested loops: on tables
	// never analyzed the planner joined an org's entries to themselves by
	// a scan of the org for each of them, most of the test's CPU.
	tx, err := w.pool.Begin(w.ctx)
	if err != nil {
		t.Fatalf("seed %d round %d: the invariants: %v", w.seed, r, err)
	}
	defer tx.Rollback(w.ctx)
	if _, err := tx.Exec(w.ctx, "SET LOCAL enable_nestloop = off"); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(w.ctx, invariantsQuery, w.org)
	if err != nil {
		t.Fatalf("seed %d round %d: the invariants: %v", w.seed, r, err)
	}
	for rows.Next() {
		var i, n int
		var example *string
		if err := rows.Scan(&i, &n, &example); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("seed %d round %d: %s: %d violations, e.g. %s", w.seed, r, invariantSQL[i].name, n, deref(example))
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("seed %d round %d: the invariants: %v", w.seed, r, err)
	}
	tx.Rollback(w.ctx)
	w.checkCounters(r)
	w.checkDocuments(r)
	w.checkForgotten(r)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// checkCounters: ctl stats' counters equal direct counts of the rows.
func (w *invWorld) checkCounters(r int) {
	st, err := w.ops.Operations().Stats(w.ctx, w.org, 10)
	if err != nil {
		w.t.Fatalf("seed %d round %d: stats: %v", w.seed, r, err)
	}
	var want [8]int64
	err = w.pool.QueryRow(w.ctx, `SELECT
		(SELECT count(*) FROM knowledge WHERE org_id = $1),
		(SELECT count(*) FROM knowledge WHERE org_id = $1 AND head_id IS NULL AND (expires_at IS NULL OR expires_at > now())),
		(SELECT count(*) FROM knowledge WHERE org_id = $1 AND head_id IS NOT NULL),
		(SELECT count(*) FROM knowledge WHERE org_id = $1 AND head_id IS NULL AND expires_at <= now()),
		(SELECT count(*) FROM knowledge_tombstones WHERE org_id = $1),
		(SELECT count(*) FROM knowledge_documents WHERE org_id = $1 AND live),
		(SELECT count(*) FROM knowledge_sections WHERE org_id = $1 AND ended_at IS NULL),
		(SELECT count(*) FROM knowledge_relations WHERE org_id = $1 AND valid_to IS NULL)`, w.org).
		Scan(&want[0], &want[1], &want[2], &want[3], &want[4], &want[5], &want[6], &want[7])
	if err != nil {
		w.t.Fatal(err)
	}
	got := [8]int64{st.Entries, st.Heads, st.Superseded, st.Expired, st.Forgotten, st.Documents, st.Sections, st.OpenRelations}
	if got != want {
		w.t.Errorf("seed %d round %d: counters (entries, heads, superseded, expired, forgotten, documents, sections, open relations) %v, direct counts %v",
			w.seed, r, got, want)
	}
}

// checkDocuments: for every live document, get_knowledge's sections,
// list_knowledge {documentId} and the section rows name the same entries.
func (w *invWorld) checkDocuments(r int) {
	rows, err := w.pool.Query(w.ctx, `SELECT d.id,
		coalesce((SELECT array_agg(s.id ORDER BY s.id) FROM knowledge_sections s WHERE s.org_id = d.org_id AND s.document_id = d.id AND s.ended_at IS NULL), '{}')
		FROM knowledge_documents d WHERE d.org_id = $1 AND d.live`, w.org)
	if err != nil {
		w.t.Fatal(err)
	}
	type doc struct {
		id       uuid.UUID
		sections []uuid.UUID
	}
	var docs []doc
	for rows.Next() {
		var d doc
		if err := rows.Scan(&d.id, &d.sections); err != nil {
			w.t.Fatal(err)
		}
		docs = append(docs, d)
	}
	if err := rows.Err(); err != nil {
		w.t.Fatal(err)
	}
	c := w.agents[0]
	for _, d := range docs {
		e, err := w.svc.Get(w.ctx, c, d.id)
		if err != nil || e.Document == nil {
			w.t.Errorf("seed %d round %d: get_knowledge of live document %s: %v", w.seed, r, d.id, err)
			continue
		}
		var fromGet []uuid.UUID
		for _, s := range e.Document.Sections {
			fromGet = append(fromGet, s.ID)
		}
		limit := 100
		l, err := w.svc.List(w.ctx, c, knowledge.ListInput{DocumentID: &d.id, Limit: &limit})
		if err != nil {
			w.t.Errorf("seed %d round %d: list_knowledge {documentId %s}: %v", w.seed, r, d.id, err)
			continue
		}
		var fromList []uuid.UUID
		for _, it := range l.Hits {
			fromList = append(fromList, it.ID)
		}
		slices.SortFunc(fromGet, compareUUID)
		slices.SortFunc(fromList, compareUUID)
		if !slices.Equal(fromGet, d.sections) || !slices.Equal(fromList, d.sections) {
			w.t.Errorf("seed %d round %d: document %s: sections %v, get_knowledge %v, list_knowledge {documentId} %v",
				w.seed, r, d.id, d.sections, fromGet, fromList)
		}
	}
}

func compareUUID(a, b uuid.UUID) int { return strings.Compare(a.String(), b.String()) }

// checkForgotten: an entry forgotten since the last round is found by no
// read: get answers its tombstone (to its author and forgetter) or
// not_found, list_relations not_found, and no search (by its own word,
// with hops) or listing names it.
func (w *invWorld) checkForgotten(r int) {
	rows, err := w.pool.Query(w.ctx, `SELECT id FROM knowledge_tombstones WHERE org_id = $1`, w.org)
	if err != nil {
		w.t.Fatal(err)
	}
	var fresh []uuid.UUID
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			w.t.Fatal(err)
		}
		if !w.forgotten[id] {
			fresh = append(fresh, id)
		}
	}
	if err := rows.Err(); err != nil {
		w.t.Fatal(err)
	}
	c := w.agents[0]
	minScore := 0.0
	for _, id := range fresh {
		w.forgotten[id] = true
		e, err := w.svc.Get(w.ctx, c, id)
		switch {
		case err == nil && (e.State != knowledge.StateForgotten || e.Title != "" || e.Body != ""):
			w.t.Errorf("seed %d round %d: get_knowledge of forgotten %s: state %q title %q", w.seed, r, id, e.State, e.Title)
		case err != nil && errs.CodeOf(err) != errs.CodeNotFound:
			w.t.Errorf("seed %d round %d: get_knowledge of forgotten %s: %v", w.seed, r, id, err)
		}
		if _, err := w.svc.Relations(w.ctx, c, knowledge.RelationsInput{ID: id, IncludeClosed: true}); errs.CodeOf(err) != errs.CodeNotFound {
			w.t.Errorf("seed %d round %d: list_relations of forgotten %s: %v, want not_found", w.seed, r, id, err)
		}
		if word := w.words[id]; word != "" {
			res, err := w.svc.Search(w.ctx, c, knowledge.SearchInput{Query: word, Hops: 1, IncludeSuperseded: true, IncludeExpired: true, MinScore: &minScore})
			if err != nil {
				w.t.Errorf("seed %d round %d: search: %v", w.seed, r, err)
			} else {
				w.noForgotten(r, "search_knowledge "+word, hitIDs(res.Hits))
			}
		}
	}
	// The reads over everything: a search with hops, a listing.
	res, err := w.svc.Search(w.ctx, c, knowledge.SearchInput{Query: "pump valve", Hops: 2, IncludeSuperseded: true, MinScore: &minScore})
	if err != nil {
		w.t.Errorf("seed %d round %d: search: %v", w.seed, r, err)
	} else {
		w.noForgotten(r, "search_knowledge with hops", hitIDs(res.Hits))
	}
	limit := 100
	l, err := w.svc.List(w.ctx, c, knowledge.ListInput{IncludeSuperseded: true, IncludeExpired: true, Limit: &limit})
	if err != nil {
		w.t.Errorf("seed %d round %d: list: %v", w.seed, r, err)
		return
	}
	var ids []uuid.UUID
	for _, it := range l.Hits {
		ids = append(ids, it.ID)
	}
	w.noForgotten(r, "list_knowledge", ids)
}

func hitIDs(hits []knowledge.Hit) []uuid.UUID {
	var ids []uuid.UUID
	for _, h := range hits {
		ids = append(ids, h.ID)
		if h.HeadID != nil {
			ids = append(ids, *h.HeadID)
		}
	}
	return ids
}

func (w *invWorld) noForgotten(r int, read string, ids []uuid.UUID) {
	for _, id := range ids {
		if w.forgotten[id] {
			w.t.Errorf("seed %d round %d: %s names forgotten entry %s", w.seed, r, read, id)
		}
	}
}

// checkExport: the org's export names no forgotten entry (once, at the
// end: it reads the whole org).
func (w *invWorld) checkExport() {
	pr, pw := io.Pipe()
	go func() {
		_, err := w.ops.Operations().Export(w.ctx, w.org, pw, knowledge.ExportOptions{})
		pw.CloseWithError(err)
	}()
	out, err := io.ReadAll(pr)
	if err != nil {
		w.t.Fatalf("seed %d: export: %v", w.seed, err)
	}
	for id := range w.forgotten {
		if strings.Contains(string(out), id.String()) {
			w.t.Errorf("seed %d: the export names forgotten entry %s", w.seed, id)
		}
	}
}
