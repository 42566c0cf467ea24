package main

import (
	"flag"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/db"
)

// dbTarget is where a PostgreSQL URL leads: what an operator must see to
// know which database a command touched. It never holds the URL itself,
// which may carry a password.
type dbTarget struct {
	Host     string `json:"host"`
	Port     uint16 `json:"port"`
	Database string `json:"database"`
	Role     string `json:"role"`
}

// targetOf reads url as the connection would (pgx's parser, PG*
// variables for what the URL leaves out).
func targetOf(url string) (dbTarget, error) {
	c, err := pgconn.ParseConfig(url)
	if err != nil {
		return dbTarget{}, err
	}
	return dbTarget{Host: c.Host, Port: c.Port, Database: c.Database, Role: c.User}, nil
}

func (t dbTarget) String() string {
	return fmt.Sprintf("database %s on %s as %s", t.Database, t.address(), t.Role)
}

func (t dbTarget) address() string {
	return t.Host + ":" + strconv.Itoa(int(t.Port))
}

// sameDatabase tells whether t and o are one database, whatever role each
// connects as (the owner's and the operator's URLs differ in the role by
// design). The loopback's names are one host.
func (t dbTarget) sameDatabase(o dbTarget) bool {
	loopback := func(h string) string {
		switch h {
		case "localhost", "127.0.0.1", "::1":
			return "loopback"
		}
		return h
	}
	return loopback(t.Host) == loopback(o.Host) && t.Port == o.Port && t.Database == o.Database
}

// ownerFlags is the flag of the commands that connect as the schema owner.
type ownerFlags struct{ ignoreDatabaseURL bool }

func (f *ownerFlags) define(fs *flag.FlagSet) {
	fs.BoolVar(&f.ignoreDatabaseURL, "ignore-database-url", false,
		"connect to OWNER_DATABASE_URL's database even though DATABASE_URL names another")
}

// ownerDB opens OWNER_DATABASE_URL, the schema owner's connection of
// migrate and isolate-org. Every other command uses DATABASE_URL, so an
// operator who set only that one (DATABASE_URL=.../mydb ctl migrate up)
// means mydb; the owner's URL, unset, would lead to the default database
// instead, and migrating it would look like success. So when DATABASE_URL
// is set and names another database than the owner's URL, ownerDB
// refuses, naming both, unless the operator said it means the owner's
// (--ignore-database-url).
func (e *env) ownerDB(f *ownerFlags) (*pgxpool.Pool, error) {
	cfg := e.config()
	ownerURL := cfg.String("OWNER_DATABASE_URL", db.DefaultOwnerURL)
	owner, err := targetOf(ownerURL)
	if err != nil {
		return nil, fmt.Errorf("OWNER_DATABASE_URL: %w", err)
	}
	if opURL := e.getenv("DATABASE_URL"); opURL != "" && !f.ignoreDatabaseURL {
		op, err := targetOf(opURL)
		if err != nil {
			return nil, fmt.Errorf("DATABASE_URL: %w", err)
		}
		if !op.sameDatabase(owner) {
			from := "OWNER_DATABASE_URL"
			if e.getenv("OWNER_DATABASE_URL") == "" {
				from = "OWNER_DATABASE_URL (not set: its default)"
			}
			return nil, fmt.Errorf("DATABASE_URL names database %s on %s, but this command connects as the schema owner with %s, which names database %s on %s: "+
				"set OWNER_DATABASE_URL to the owner's URL of the database you mean, or pass --ignore-database-url to use %s on %s",
				op.Database, op.address(), from, owner.Database, owner.address(), owner.Database, owner.address())
		}
	}
	p, err := db.Open(e.ctx, ownerURL)
	if err != nil {
		return nil, fmt.Errorf("OWNER_DATABASE_URL: %w", err)
	}
	e.target = &owner
	return p, nil
}
