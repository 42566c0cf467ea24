package testenv

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/db"
)

// DefaultDatabaseURL is the admin connection used when TEST_DATABASE_URL is unset.
const DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// DatabaseURL is the admin URL tests use to create their databases.
func DatabaseURL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultDatabaseURL
}

// templateName names the migrated template after a hash of the migrations, so
// a changed migration gets a new template and an unchanged one is reused by
// every test binary.
func templateName() (string, error) {
	h := sha256.New()
	var names []string
	err := fs.WalkDir(db.Migrations(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			names = append(names, p)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(names)
	for _, n := range names {
		b, err := fs.ReadFile(db.Migrations(), n)
		if err != nil {
			return "", err
		}
		h.Write([]byte(n))
		h.Write(b)
	}
	name := "knowledge_tpl_" + hex.EncodeToString(h.Sum(nil))[:12]
	if IsCluster() {
		name += "_citus" + citusShardCount()
	}
	return name, nil
}

// urlFor returns base with its database name replaced.
func urlFor(base, dbname string) (string, error) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme == "" {
		return "", fmt.Errorf("testenv: database url %q is not a URL", base)
	}
	u.Path = "/" + dbname
	return u.String(), nil
}

// ensureTemplate creates and migrates the template database once per
// migration hash, in tablespace ts when it is not "" (memoryTablespace). A
// Postgres advisory lock serialises test binaries.
func ensureTemplate(ctx context.Context, admin *pgx.Conn, base, ts string) (string, error) {
	name, err := templateName()
	if err != nil {
		return "", err
	}
	if ts != "" {
		name += "_mem" // a template of its own: its clones live where it does
	}
	create := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	if ts != "" {
		create += " TABLESPACE " + pgx.Identifier{ts}.Sanitize()
	}
	if _, err := admin.Exec(ctx, "SELECT pg_advisory_lock(hashtext('knowledge_testenv_template'))"); err != nil {
		return "", err
	}
	defer admin.Exec(context.Background(), "SELECT pg_advisory_unlock(hashtext('knowledge_testenv_template'))")

	var ready bool
	err = admin.QueryRow(ctx, "SELECT datistemplate FROM pg_database WHERE datname = $1", name).Scan(&ready)
	if err == nil && ready {
		return name, nil
	}
	if IsCluster() {
		if err := makeClusterTemplate(ctx, admin, base, name); err != nil {
			return "", fmt.Errorf("testenv: make the cluster's template: %w", err)
		}
		return name, sealTemplate(ctx, admin, name)
	}
	if err == nil { // a half-made template from a killed run
		if err := dropDatabase(ctx, admin, name); err != nil {
			return "", err
		}
	}
	if _, err := admin.Exec(ctx, create); err != nil {
		return "", fmt.Errorf("testenv: create template: %w", err)
	}
	u, err := urlFor(base, name)
	if err != nil {
		return "", err
	}
	pool, err := db.Open(ctx, u)
	if err != nil {
		return "", err
	}
	_, err = db.Migrate(ctx, pool)
	if err == nil {
		err = db.EnsureRoles(ctx, pool, db.DefaultRoles())
	}
	pool.Close()
	if err != nil {
		return "", fmt.Errorf("testenv: migrate template: %w", err)
	}
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH IS_TEMPLATE true"); err != nil {
		return "", err
	}
	return name, nil
}

// Database is an isolated, migrated database for one test. Pool connects
// as the server's admin (the schema's owner: exempt from row-level
// security); AppPool and OperatorPool connect as the roles the MCP server
// and ctl use (db.Roles).
type Database struct {
	Name string
	URL  string
	Pool *pgxpool.Pool

	cluster bool      // a database on every node of a Citus cluster (cluster.go)
	slot    *pgx.Conn // the admin connection holding the database's slot (slot.go)
}

// AppPool is a pool on the database as the application's role
// (db.DefaultAppRole: row-level security applies), closed when t ends.
func (d *Database) AppPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return d.poolAs(t, db.DefaultAppRole)
}

// AppURL is the database's URL as the application's role.
func (d *Database) AppURL() string { return userURL(d.URL, db.DefaultAppRole) }

// OperatorURL is the database's URL as the operator's role.
func (d *Database) OperatorURL() string { return userURL(d.URL, db.DefaultOperatorRole) }

// OperatorPool is a pool on the database as the operator's role
// (db.DefaultOperatorRole), closed when t ends.
func (d *Database) OperatorPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return d.poolAs(t, db.DefaultOperatorRole)
}

func (d *Database) poolAs(t testing.TB, role string) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := db.Open(ctx, userURL(d.URL, role))
	if err != nil {
		t.Fatalf("testenv: connect as %s: %v", role, err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// userURL is u with its user replaced (no password: the test server trusts
// loopback connections, as the local setup's does).
func userURL(u, user string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	p.User = url.User(user)
	return p.String()
}

// Postgres creates a fresh migrated database for t, cloned from the shared
// template, and drops it when t ends. A server that cannot be reached fails
// the test with a message saying how to start one.
func Postgres(t testing.TB) *Database {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), slotWait+2*time.Minute)
	defer cancel()
	d, err := OpenPostgres(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.closeAfter(t) })
	return d
}

// OpenPostgres is Postgres for code that has no testing.TB (an Example
// function): the caller closes the database, which drops it.
func OpenPostgres(ctx context.Context) (*Database, error) {
	admin, err := takeSlot(ctx)
	if err != nil {
		return nil, err
	}
	ts := memoryTablespace(ctx, admin)
	tpl, err := ensureTemplate(ctx, admin, DatabaseURL(), ts)
	if err != nil {
		admin.Close(context.Background())
		return nil, fmt.Errorf("testenv: %w", err)
	}
	return createDatabase(ctx, admin, tpl, ts)
}

// EmptyPostgres creates a fresh database with no schema at all (for testing
// migrations themselves) and drops it when t ends.
func EmptyPostgres(t testing.TB) *Database {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), slotWait+2*time.Minute)
	defer cancel()
	admin, err := takeSlot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d, err := createDatabase(ctx, admin, "template0", memoryTablespace(ctx, admin))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.closeAfter(t) })
	return d
}

// Close closes the database's pool and drops the database (a database of
// Postgres or EmptyPostgres is closed when its test ends).
func (d *Database) Close() {
	d.close(func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) })
}

// closeAfter closes the database at the end of t: its pool at once, the
// drop in the background under Main (a failed drop is reported on stderr:
// t has ended by then).
func (d *Database) closeAfter(t testing.TB) {
	d.Pool.Close()
	if !backgroundDrops.Load() {
		d.drop(t.Logf)
		return
	}
	drops.Add(1)
	go func() {
		defer drops.Done()
		d.drop(func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) })
	}()
}

func (d *Database) close(logf func(format string, args ...any)) {
	d.Pool.Close()
	d.drop(logf)
}

// drop drops the database on its slot's connection, then closes that
// connection, which gives the slot back.
func (d *Database) drop(logf func(format string, args ...any)) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := d.slot
	defer conn.Close(ctx)
	var err error
	drop := func(c *pgx.Conn) error { return dropDatabase(ctx, c, d.Name) }
	if d.cluster {
		err = onNodes(ctx, conn, drop)
	} else {
		err = drop(conn)
	}
	if err != nil {
		logf("testenv: drop %s: %v", d.Name, err)
	}
}

// dropDatabase drops database name on c, if it exists, whoever is still
// connected to it.
func dropDatabase(ctx context.Context, c *pgx.Conn, name string) error {
	_, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	return err
}

func adminConn(ctx context.Context) (*pgx.Conn, error) {
	admin, err := pgx.Connect(ctx, DatabaseURL())
	if err != nil {
		return nil, fmt.Errorf("testenv: cannot reach PostgreSQL at %s (run `go tool task setup`): %w", DatabaseURL(), err)
	}
	return admin, nil
}

// createDatabase clones tpl on admin, a slot's connection (takeSlot), which
// the database keeps until it is dropped; admin is closed if it fails. ts
// is memoryTablespace's answer, where tpl lives (or, for template0, where
// the clone goes).
func createDatabase(ctx context.Context, admin *pgx.Conn, tpl, ts string) (*Database, error) {
	sweepOrphans()
	owner, err := ownerTag(ctx, admin)
	if err != nil {
		admin.Close(context.Background())
		return nil, err
	}
	name := testDBPrefix + owner + "_" + randomHex(3) // sweep.go
	create := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize() + " TEMPLATE " + pgx.Identifier{tpl}.Sanitize()
	if ts != "" {
		// In memory a clone is copied file by file (FILE_COPY) rather than
		// through the WAL: about 5% off the suite's time (on disk it was not
		// cheaper). A clone of ours lives where its template does;
		// EmptyPostgres's is put there.
		create += " STRATEGY FILE_COPY"
		if tpl == "template0" {
			create += " TABLESPACE " + pgx.Identifier{ts}.Sanitize()
		}
	}
	clone := func(c *pgx.Conn) error {
		var err error
		// Cloning can collide with another backend briefly connected to the
		// template (e.g. the migration's last connection closing); retry.
		for attempt := 0; ; attempt++ {
			_, err = c.Exec(ctx, create)
			if err == nil {
				if err := copySettings(ctx, c, tpl, name); err != nil {
					return err
				}
				return relaxDurability(ctx, c, name)
			}
			if attempt >= 20 || !strings.Contains(err.Error(), "being accessed by other users") {
				return err
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// A cluster's database is a clone on every node (cluster.go), unless
	// tpl is template0 (EmptyPostgres: a plain database on the coordinator).
	cluster := IsCluster() && tpl != "template0"
	if cluster {
		err = onNodes(ctx, admin, clone)
	} else {
		err = clone(admin)
	}
	if err != nil {
		admin.Close(context.Background())
		return nil, fmt.Errorf("testenv: create database: %w", err)
	}
	d := &Database{Name: name, cluster: cluster, slot: admin}
	if d.URL, err = urlFor(DatabaseURL(), name); err == nil {
		d.Pool, err = db.Open(ctx, d.URL)
	}
	if err != nil {
		d.drop(func(string, ...any) {})
		return nil, fmt.Errorf("testenv: %w", err)
	}
	return d, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// copySettings gives database to the settings of database from (ALTER
// DATABASE ... SET, which a clone does not inherit: they are kept by the
// database's oid). The migrations set some on a Citus database
// (citus.propagate_set_commands, jit, the HNSW defaults: 00027, 00029).
func copySettings(ctx context.Context, c *pgx.Conn, from, to string) error {
	rows, err := c.Query(ctx, `SELECT unnest(s.setconfig) FROM pg_db_role_setting s
		JOIN pg_database d ON d.oid = s.setdatabase WHERE d.datname = $1 AND s.setrole = 0`, from)
	if err != nil {
		return err
	}
	settings, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, kv := range settings {
		k, v, _ := strings.Cut(kv, "=")
		if _, err := c.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{to}.Sanitize()+" SET "+k+" = '"+strings.ReplaceAll(v, "'", "''")+"'"); err != nil {
			return fmt.Errorf("copy setting %s: %w", k, err)
		}
	}
	return nil
}

// relaxDurability turns synchronous_commit off in a test's database: a
// commit returns before its WAL reaches the disk. A test database is
// dropped when its test ends and never outlives a crash, so nothing is
// lost, and a test that commits thousands of times no longer waits for a
// disk flush at each one. Visibility, locking and constraints are those
// of any commit: only the wait for the flush goes.
func relaxDurability(ctx context.Context, c *pgx.Conn, name string) error {
	_, err := c.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{name}.Sanitize()+" SET synchronous_commit = off")
	return err
}

// MemoryTablespace is the tablespace, made by setup in memory (tmpfs), that
// the test databases live in when it is there (scripts/setup.sh).
const MemoryTablespace = "knowledge_test"

// memoryTablespace returns MemoryTablespace if the server has it and its
// directory still exists (tmpfs is emptied by a reboot), else "": the
// databases then live in the server's default tablespace. TEST_TABLESPACE=
// default chooses that anyway.
//
// A test clones the migrated template, about 500 files, and drops it at
// its end: some 350 databases a run of the suite, 200,000 files created
// and unlinked. On ext4 the kernel's inode allocation skips the inodes
// freed a moment before (recently_deleted): with the suite's churn the
// kernel took 44% of the run's CPU, 34% in memory, where a file is a
// page-cache entry (README, "Tests"). What a test asserts is unchanged:
// the same server and catalogue.
func memoryTablespace(ctx context.Context, admin *pgx.Conn) string {
	if os.Getenv("TEST_TABLESPACE") == "default" || IsCluster() {
		return ""
	}
	var ok bool
	err := admin.QueryRow(ctx, `SELECT coalesce((pg_stat_file(pg_tablespace_location(oid), true)).isdir, false)
		FROM pg_tablespace WHERE spcname = $1`, MemoryTablespace).Scan(&ok)
	if err != nil || !ok { // none, or an admin not allowed to look: the default
		return ""
	}
	return MemoryTablespace
}
