package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgvector/pgvector-go"
	"github.com/redis/go-redis/v9"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// database is one benchmark database: migrated, its roles granted, one
// org with one agent and a token of every scope.
type database struct {
	name     string
	ownerURL string
	appURL   string
	owner    *pgxpool.Pool
	org      uuid.UUID
	agent    uuid.UUID
	token    string
}

func withDB(base, name, user string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	if user != "" {
		u.User = url.User(user)
	}
	return u.String(), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// createDatabase makes a new migrated database with one org, agent and
// token (or, with template, a copy of template's, its org and token kept).
//
// A copy (STRATEGY FILE_COPY) is the template's files: tables, indexes,
// visibility and free-space maps, and the catalogs, so the planner's
// counters (pg_class) and column statistics (pg_statistic: none, never
// analyzed) are the template's, and the copy is as never vacuumed or
// analyzed as it was. The cumulative statistics (pg_stat_user_tables:
// changes since the last vacuum and analyze) are not copied; they start at
// zero, which nothing searched reads, and Upkeep, which reads them, judges
// a never-analyzed or unvacuumed table from the catalog too (its unseen).
func createDatabase(ctx context.Context, ownerBase, name string, template *database) (*database, error) {
	if err := createEmpty(ctx, ownerBase, name, template); err != nil {
		return nil, err
	}
	d, err := newDatabase(ctx, ownerBase, name)
	if err != nil {
		return nil, err
	}
	if template != nil {
		d.org, d.agent, d.token = template.org, template.agent, template.token
		return d, nil
	}
	if _, err := db.Migrate(ctx, d.owner); err != nil {
		return nil, fmt.Errorf("migrate %s: %w", name, err)
	}
	if err := db.EnsureRoles(ctx, d.owner, db.DefaultRoles()); err != nil {
		return nil, fmt.Errorf("roles of %s: %w", name, err)
	}
	ten := tenancy.New(d.owner)
	org, err := ten.CreateOrg(ctx, "bench")
	if err != nil {
		return nil, err
	}
	ag, err := ten.CreateAgent(ctx, org.ID, "bench")
	if err != nil {
		return nil, err
	}
	tok, err := ten.IssueToken(ctx, org.ID, ag.ID, tenancy.Catalogue, 0)
	if err != nil {
		return nil, err
	}
	d.org, d.agent, d.token = org.ID, ag.ID, tok.Token
	// The worker builds its model's vector index at start, before the
	// knowledge it serves is stored: so here.
	if _, err := knowledge.NewMaintenance(d.service(), knowledge.MaintenanceConfig{}).EnsureVectorIndex(ctx); err != nil {
		return nil, err
	}
	return d, nil
}

// createEmpty creates database name: empty, or with template a copy of
// template's (whose pool is closed meanwhile: a template must have no
// session, and opened again).
func createEmpty(ctx context.Context, ownerBase, name string, template *database) error {
	admin, err := pgx.Connect(ctx, ownerBase)
	if err != nil {
		return fmt.Errorf("OWNER_DATABASE_URL: %w", err)
	}
	defer admin.Close(ctx)
	sql := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	if template != nil {
		template.owner.Close()
		sql += " TEMPLATE " + pgx.Identifier{template.name}.Sanitize() + " STRATEGY FILE_COPY"
	}
	if _, err := admin.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s: %w", sql, err)
	}
	if template != nil {
		if template.owner, err = db.Open(ctx, template.ownerURL); err != nil {
			return err
		}
	}
	return nil
}

// newDatabase is database name's handle: its owner's and the application
// role's URLs, and a pool as its owner.
func newDatabase(ctx context.Context, ownerBase, name string) (*database, error) {
	d := &database{name: name}
	var err error
	if d.ownerURL, err = withDB(ownerBase, name, ""); err != nil {
		return nil, err
	}
	if d.appURL, err = withDB(ownerBase, name, db.DefaultAppRole); err != nil {
		return nil, err
	}
	if d.owner, err = db.Open(ctx, d.ownerURL); err != nil {
		return nil, err
	}
	return d, nil
}

// service is the knowledge service as the worker runs it: the owner.
func (d *database) service() *knowledge.Service {
	return knowledge.New(d.owner, knowledge.Options{Embedder: embed.NewLocal()})
}

// openDatabase opens a database a run kept (-keep), its org and agent
// "bench", with a new token.
func openDatabase(ctx context.Context, ownerBase, name string) (*database, error) {
	d, err := newDatabase(ctx, ownerBase, name)
	if err != nil {
		return nil, err
	}
	// Kept by an older build: migrated to this one's schema.
	if _, err := db.Migrate(ctx, d.owner); err != nil {
		return nil, fmt.Errorf("migrate %s: %w", name, err)
	}
	if err := db.EnsureRoles(ctx, d.owner, db.DefaultRoles()); err != nil {
		return nil, fmt.Errorf("roles of %s: %w", name, err)
	}
	ten := tenancy.New(d.owner)
	orgs, err := ten.ListOrgs(ctx)
	if err != nil || len(orgs) != 1 {
		return nil, fmt.Errorf("%s: want one org (a kept benchmark database), have %d (%v)", name, len(orgs), err)
	}
	ags, err := ten.ListAgents(ctx, orgs[0].ID)
	if err != nil || len(ags) != 1 {
		return nil, fmt.Errorf("%s: want one agent, have %d (%v)", name, len(ags), err)
	}
	tok, err := ten.IssueToken(ctx, orgs[0].ID, ags[0].ID, tenancy.Catalogue, 0)
	if err != nil {
		return nil, err
	}
	d.org, d.agent, d.token = orgs[0].ID, ags[0].ID, tok.Token
	return d, nil
}

func (d *database) drop(ctx context.Context, ownerBase string) error {
	d.owner.Close()
	admin, err := pgx.Connect(ctx, ownerBase)
	if err != nil {
		return err
	}
	defer admin.Close(ctx)
	_, err = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{d.name}.Sanitize()+" WITH (FORCE)")
	return err
}

func (d *database) count(ctx context.Context) (int, error) {
	var n int
	err := d.owner.QueryRow(ctx, "SELECT count(*) FROM knowledge WHERE org_id = $1", d.org).Scan(&n)
	return n, err
}

// bulkStore stores notes from..to-1 through the service (not timed), a few
// at once, without the store's duplicate check: the check writes nothing
// (with the in-process embedder it owes the worker no check by meaning),
// so the rows are those of stores with it, and the notes, made from one
// template, share their similarity keys by the thousand: the check's key
// look-up grew with the org until every store waited its whole budget
// (250 ms): a third of 100,000 notes took 23 minutes (load 20).
func (d *database) bulkStore(ctx context.Context, from, to int, progress func(int)) error {
	svc := knowledge.New(d.owner, knowledge.Options{Embedder: embed.NewLocal(), Testing: knowledge.TestingKnobs{SkipSimilar: true}})
	c := knowledge.Caller{OrgID: d.org, AgentID: d.agent}
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= to || ctx.Err() != nil {
					return
				}
				title, body, tags := note(i)
				if _, err := svc.Store(ctx, c, knowledge.StoreInput{Title: title, Body: body, Tags: tags}); err != nil {
					errs <- fmt.Errorf("store note %d: %w", i, err)
					return
				}
				if (i-from+1)%10000 == 0 && progress != nil {
					progress(i - from + 1)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// ready gives the org's pending entries the vectors the worker's
// embeddings handler would write, and indexes them as the worker's indexer
// does: the state of an org right after its knowledge was stored, never
// vacuumed or analyzed. It ends each entry as the handler does
// (jobs.EmbedHandler: the same rows read by knowledge.Outbox.Pending, the
// same embedder and chunking by knowledge.EmbedEntries, the columns of
// queries/embeddings.sql's MarkEmbeddingReady; TestReadyAsTheHandler
// compares the two), but in set-based statements on a table without its
// HNSW indexes, built afterwards by the product's EnsureVectorIndex as the
// worker builds them at start: the handler's statement an entry, each an
// HNSW insert, took 20 minutes at 100,000 entries.
func (d *database) ready(ctx context.Context) (embedded, indexed int, err error) {
	jobs, err := d.pendingJobs(ctx)
	if err != nil {
		return 0, 0, err
	}
	svc := d.service()
	m := knowledge.NewMaintenance(svc, knowledge.MaintenanceConfig{})
	if len(jobs) > 0 {
		kept, err := d.dropVectorIndexes(ctx)
		if err != nil {
			return 0, 0, err
		}
		for batch := range slices.Chunk(jobs, readyBatch) {
			n, err := d.writeVectors(ctx, batch)
			if err != nil {
				return embedded, 0, err
			}
			embedded += n
		}
		if _, err := m.EnsureVectorIndex(ctx); err != nil {
			return embedded, 0, err
		}
		if err := d.restoreVectorIndexes(ctx, kept); err != nil {
			return embedded, 0, err
		}
	}
	n, err := m.IndexAll(ctx)
	return embedded, int(n), err
}

// pendingJobs are the embedding jobs of the org's pending entries (those
// the worker has yet to embed), in id order.
func (d *database) pendingJobs(ctx context.Context) ([]knowledge.EmbeddingJob, error) {
	rows, err := d.owner.Query(ctx, "SELECT id, embedding_generation FROM knowledge WHERE org_id = $1 AND embedding_status = 'pending' ORDER BY id", d.org)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (knowledge.EmbeddingJob, error) {
		j := knowledge.EmbeddingJob{OrgID: d.org}
		return j, r.Scan(&j.EntryID, &j.Generation)
	})
}

// readyBatch is how many entries ready embeds and writes at once.
const readyBatch = 2000

// markReady is queries/embeddings.sql's MarkEmbeddingReady (the handler's
// write of an entry's own vector, through knowledge.Outbox.WriteVectors)
// over many entries in one statement: the product has no call that writes
// many, so the harness keeps this one copy, small, and
// TestReadyAsTheHandler holds it to the handler's result. The count
// trigger records the statement's net change once per key where the
// handler's statements record it per entry: the same counts (the test
// compares them), fewer rows in knowledge_count_deltas, which no search
// reads and Upkeep folds.
const markReady = `UPDATE knowledge k
SET embedding = v.embedding, embedding_status = 'ready', embedding_model = $2,
    embedding_error = NULL, embedded_at = now()
FROM unnest($3::uuid[], $4::int[], $5::vector[]) AS v(id, generation, embedding)
WHERE k.org_id = $1 AND k.id = v.id
  AND k.embedding_generation = v.generation AND k.embedding_status = 'pending'`

// writeVectors embeds and writes the vectors of jobs (one org's), as
// ready says, and returns how many entries it made ready.
func (d *database) writeVectors(ctx context.Context, jobs []knowledge.EmbeddingJob) (int, error) {
	ob := knowledge.NewOutbox(d.owner)
	pend, err := ob.Pending(ctx, jobs)
	if err != nil {
		return 0, err
	}
	emb := embed.NewLocal()
	model := emb.Model()
	texts := make([]knowledge.EntryText, len(pend))
	for i, p := range pend {
		texts[i] = knowledge.EntryText{Title: p.Title, Body: p.Body}
	}
	// The handler's defaults (jobs.NewEmbedHandler with no options).
	vecs, err := knowledge.EmbedEntries(ctx, emb, knowledge.ChunkOptionsFor(model), knowledge.DefaultMaxInputChars, texts)
	if err != nil {
		return 0, err
	}
	var ids []uuid.UUID
	var gens []int32
	var vs []pgvector.Vector
	var long []knowledge.PendingEntry
	var longVecs []knowledge.EntryVectors
	for i, p := range pend {
		if len(vecs[i].Vecs) > 1 {
			// Cut in chunks: the handler's own write, which also writes
			// the chunks (rare among short notes).
			long, longVecs = append(long, p), append(longVecs, vecs[i])
			continue
		}
		// A pending entry has no chunks to clear (knowledge_drop_chunks
		// drops them with the vector), so the handler's DeleteChunks
		// has nothing to do here.
		ids, gens, vs = append(ids, p.Job.EntryID), append(gens, p.Job.Generation), append(vs, pgvector.NewVector(vecs[i].Vecs[0]))
	}
	tag, err := d.owner.Exec(ctx, markReady, d.org, model, ids, gens, vs)
	if err != nil {
		return 0, fmt.Errorf("write vectors: %w", err)
	}
	n := int(tag.RowsAffected())
	if len(long) > 0 {
		res, err := ob.WriteVectors(ctx, model, long, longVecs)
		n += res.Ready
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// relCounters are what the catalog (pg_class) says of a relation's size:
// the planner's row and page counts, which VACUUM, ANALYZE and CREATE INDEX
// write, and the all-visible pages.
type relCounters struct {
	name       string
	tuples     float32
	pages      int32
	allVisible int32
}

// vectorTables are the tables whose HNSW indexes ready drops and builds
// again.
var vectorTables = []string{"knowledge", "knowledge_chunks"}

// dropVectorIndexes drops the HNSW indexes of vectorTables (the space's,
// which createDatabase built empty, as the worker does at start; an org's
// own, Upkeep's, comes later) and returns the catalog counters of those
// indexes and tables, for restoreVectorIndexes.
func (d *database) dropVectorIndexes(ctx context.Context) ([]relCounters, error) {
	rows, err := d.owner.Query(ctx, `SELECT ic.relname::text
FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid JOIN pg_am am ON am.oid = ic.relam
WHERE am.amname = 'hnsw' AND i.indrelid = ANY(SELECT to_regclass(t) FROM unnest($1::text[]) t)
ORDER BY 1`, vectorTables)
	if err != nil {
		return nil, err
	}
	idx, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	kept, err := d.relCounters(ctx, append(slices.Clone(vectorTables), idx...))
	if err != nil {
		return nil, err
	}
	for _, ix := range idx {
		if _, err := d.owner.Exec(ctx, "DROP INDEX "+pgx.Identifier{ix}.Sanitize()); err != nil {
			return nil, err
		}
	}
	return kept, nil
}

func (d *database) relCounters(ctx context.Context, names []string) ([]relCounters, error) {
	rows, err := d.owner.Query(ctx, `SELECT c.relname::text, c.reltuples, c.relpages, c.relallvisible
FROM pg_class c WHERE c.oid = ANY(SELECT to_regclass(n) FROM unnest($1::text[]) n) ORDER BY 1`, names)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (relCounters, error) {
		var c relCounters
		return c, r.Scan(&c.name, &c.tuples, &c.pages, &c.allVisible)
	})
}

// restoreVectorIndexes checks that EnsureVectorIndex built again every
// index dropVectorIndexes dropped, and writes back the catalog counters
// kept: an index build records the table's row and page counts (and the
// index's), which would make the never-analyzed planner plan from a
// table size that, built as the worker builds it (empty, before the
// stores), it never learns. Catalog writes need a superuser owner (the
// default); the product never does this, nothing but this harness needs
// it.
func (d *database) restoreVectorIndexes(ctx context.Context, kept []relCounters) error {
	names := make([]string, len(kept))
	tuples := make([]float32, len(kept))
	pages := make([]int32, len(kept))
	allVisible := make([]int32, len(kept))
	for i, c := range kept {
		names[i], tuples[i], pages[i], allVisible[i] = c.name, c.tuples, c.pages, c.allVisible
	}
	now, err := d.relCounters(ctx, names)
	if err != nil {
		return err
	}
	if len(now) != len(kept) {
		return fmt.Errorf("vector indexes: had %v, EnsureVectorIndex built %v", kept, now)
	}
	_, err = d.owner.Exec(ctx, `UPDATE pg_class c SET reltuples = k.tuples, relpages = k.pages, relallvisible = k.all_visible
FROM unnest($1::text[], $2::real[], $3::int[], $4::int[]) AS k(name, tuples, pages, all_visible)
WHERE c.oid = to_regclass(k.name)`, names, tuples, pages, allVisible)
	if err != nil {
		return fmt.Errorf("restore the catalog's counters after the vector index build (needs a superuser OWNER_DATABASE_URL): %w", err)
	}
	return nil
}

// indexAllVersions gives d the HNSW index of the entries a build before
// db/migrations/00049 made: the space's index over every version, not the
// heads only. Such a build's search statement filters heads with
// "(includeSuperseded OR head_id IS NULL)", which cannot prove an index of
// heads only usable: against this build's index it would rank the org
// without one, and a comparison would time that instead of the build. The
// catalog's counters are kept as ready leaves them (restoreVectorIndexes).
func (d *database) indexAllVersions(ctx context.Context) error {
	rows, err := d.owner.Query(ctx, `SELECT indexname::text, indexdef FROM pg_indexes
WHERE tablename = 'knowledge' AND indexname LIKE 'knowledge\_hnsw\_%' AND indexdef LIKE '% AND (head_id IS NULL))'`)
	if err != nil {
		return err
	}
	type index struct{ name, def string }
	ixs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (index, error) {
		var ix index
		return ix, r.Scan(&ix.name, &ix.def)
	})
	if err != nil {
		return err
	}
	if len(ixs) == 0 {
		return errors.New("-base-index-versions: no HNSW index of heads only to replace")
	}
	names := slices.Clone(vectorTables)
	for _, ix := range ixs {
		names = append(names, ix.name)
	}
	kept, err := d.relCounters(ctx, names)
	if err != nil {
		return err
	}
	conn, err := d.owner.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SET maintenance_work_mem = '2GB'"); err != nil {
		return err
	}
	defer conn.Exec(context.WithoutCancel(ctx), "RESET maintenance_work_mem")
	for _, ix := range ixs {
		if _, err := conn.Exec(ctx, "DROP INDEX "+pgx.Identifier{ix.name}.Sanitize()); err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, strings.Replace(ix.def, " AND (head_id IS NULL))", ")", 1)); err != nil {
			return fmt.Errorf("%s over every version: %w", ix.name, err)
		}
	}
	return d.restoreVectorIndexes(ctx, kept)
}

// upkeep runs the worker's upkeep pass (vacuum, analyze, the org's own
// vector index).
func (d *database) upkeep(ctx context.Context) (time.Duration, error) {
	t := time.Now()
	_, err := knowledge.NewMaintenance(d.service(), knowledge.MaintenanceConfig{}).Upkeep(ctx)
	return time.Since(t), err
}

// redisLease is one of Redis's logical databases 1..15, leased as the
// tests lease them (packages/testenv), so that the servers' queues and
// keys meet no test's, and renewed while the benchmark runs.
type redisLease struct {
	url  string
	stop func()
}

func leaseRedis(ctx context.Context, base string) (*redisLease, error) {
	opts, err := redis.ParseURL(base)
	if err != nil {
		return nil, fmt.Errorf("REDIS_URL: %w", err)
	}
	ctrlOpts := *opts
	ctrlOpts.DB = 0
	ctrl := redis.NewClient(&ctrlOpts)
	owner := randomHex(8)
	deadline := time.Now().Add(5 * time.Minute)
	for {
		for n := 1; n <= 15; n++ {
			key := "testenv:lease:" + strconv.Itoa(n)
			ok, err := ctrl.SetNX(ctx, key, owner, 10*time.Minute).Result()
			if err != nil {
				ctrl.Close()
				return nil, fmt.Errorf("lease a Redis database: %w", err)
			}
			if !ok {
				continue
			}
			o := *opts
			o.DB = n
			cl := redis.NewClient(&o)
			cl.FlushDB(ctx)
			rctx, cancel := context.WithCancel(context.Background())
			go func() { // renew
				t := time.NewTicker(time.Minute)
				defer t.Stop()
				for {
					select {
					case <-rctx.Done():
						return
					case <-t.C:
						ctrl.Expire(rctx, key, 10*time.Minute)
					}
				}
			}()
			u := fmt.Sprintf("redis://%s/%d", o.Addr, n)
			if o.Password != "" {
				u = fmt.Sprintf("redis://:%s@%s/%d", o.Password, o.Addr, n)
			}
			return &redisLease{url: u, stop: func() {
				cancel()
				cl.FlushDB(context.Background())
				cl.Close()
				if v, _ := ctrl.Get(context.Background(), key).Result(); v == owner {
					ctrl.Del(context.Background(), key)
				}
				ctrl.Close()
			}}, nil
		}
		if time.Now().After(deadline) {
			ctrl.Close()
			return nil, fmt.Errorf("no free Redis database (1..15) within 5 minutes")
		}
		time.Sleep(200 * time.Millisecond)
	}
}
