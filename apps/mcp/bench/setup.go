package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
	"github.com/agentfleet/orchestrator/packages/knowledge/jobs"
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
func createDatabase(ctx context.Context, ownerBase, name string, template *database) (*database, error) {
	admin, err := pgx.Connect(ctx, ownerBase)
	if err != nil {
		return nil, fmt.Errorf("OWNER_DATABASE_URL: %w", err)
	}
	defer admin.Close(ctx)
	sql := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	if template != nil {
		template.owner.Close()
		sql += " TEMPLATE " + pgx.Identifier{template.name}.Sanitize() + " STRATEGY FILE_COPY"
	}
	if _, err := admin.Exec(ctx, sql); err != nil {
		return nil, fmt.Errorf("%s: %w", sql, err)
	}
	if template != nil {
		if template.owner, err = db.Open(ctx, template.ownerURL); err != nil {
			return nil, err
		}
	}
	d := &database{name: name}
	if d.ownerURL, err = withDB(ownerBase, name, ""); err != nil {
		return nil, err
	}
	if d.appURL, err = withDB(ownerBase, name, db.DefaultAppRole); err != nil {
		return nil, err
	}
	if d.owner, err = db.Open(ctx, d.ownerURL); err != nil {
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

// service is the knowledge service as the worker runs it: the owner.
func (d *database) service() *knowledge.Service {
	return knowledge.New(d.owner, knowledge.Options{Embedder: embed.NewLocal()})
}

// openDatabase opens a database a run kept (-keep), its org and agent
// "bench", with a new token.
func openDatabase(ctx context.Context, ownerBase, name string) (*database, error) {
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
// at once.
func (d *database) bulkStore(ctx context.Context, from, to int, progress func(int)) error {
	svc := d.service()
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

// ready embeds the org's pending entries with the worker's own handler and
// indexes them as the worker's indexer does: the state of an org right
// after its knowledge was stored, never vacuumed or analyzed.
func (d *database) ready(ctx context.Context) (embedded, indexed int, err error) {
	rows, err := d.owner.Query(ctx, "SELECT id, embedding_generation FROM knowledge WHERE org_id = $1 AND embedding_status = 'pending'", d.org)
	if err != nil {
		return 0, 0, err
	}
	type pending struct {
		id  uuid.UUID
		gen int32
	}
	ps, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (pending, error) {
		var p pending
		return p, r.Scan(&p.id, &p.gen)
	})
	if err != nil {
		return 0, 0, err
	}
	h := jobs.NewEmbedHandler(d.owner, embed.NewLocal(), jobs.HandlerOptions{})
	for batch := range slices.Chunk(ps, 64) {
		js := make([]knowledge.EmbeddingJob, len(batch))
		for k, p := range batch {
			js[k] = knowledge.EmbeddingJob{OrgID: d.org, EntryID: p.id, Generation: p.gen}
		}
		if err := h.Process(ctx, js); err != nil {
			return 0, 0, err
		}
	}
	n, err := knowledge.NewMaintenance(d.service(), knowledge.MaintenanceConfig{}).IndexAll(ctx)
	return len(ps), int(n), err
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
