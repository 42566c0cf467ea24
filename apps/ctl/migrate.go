package main

import (
	"fmt"
	"io"

	"github.com/agentfleet/orchestrator/db"
)

// Migrations run as the schema owner (OWNER_DATABASE_URL), not as the
// operator's role the other commands use; env.ownerDB refuses an owner's
// URL that leads elsewhere than DATABASE_URL.

func runMigrateUp(e *env, f *ownerFlags) error {
	cfg := e.config()
	roles := db.Roles{
		App:      cfg.String("DB_APP_ROLE", db.DefaultAppRole),
		Operator: cfg.String("DB_OPERATOR_ROLE", db.DefaultOperatorRole),
	}
	if err := roles.Check(); err != nil {
		return fmt.Errorf("DB_APP_ROLE / DB_OPERATOR_ROLE: %w", err)
	}
	p, err := e.ownerDB(f)
	if err != nil {
		return err
	}
	defer p.Close()
	applied, err := db.Migrate(e.ctx, p)
	if err != nil {
		return err
	}
	if err := db.EnsureRoles(e.ctx, p, roles); err != nil {
		return fmt.Errorf("roles: %w", err)
	}
	return e.print(map[string]any{"applied": applied, "roles": roles}, func(w io.Writer) {
		if len(applied) == 0 {
			fmt.Fprintln(w, "schema is up to date")
		}
		for _, m := range applied {
			fmt.Fprintf(w, "applied %05d %s\n", m.Version, m.Name)
		}
		fmt.Fprintf(w, "roles: application %s, operator %s\n", roles.App, roles.Operator)
	})
}

func runMigrateStatus(e *env, f *ownerFlags) error {
	p, err := e.ownerDB(f)
	if err != nil {
		return err
	}
	defer p.Close()
	st, err := db.Status(e.ctx, p)
	if err != nil {
		return err
	}
	return e.print(map[string]any{"migrations": st}, func(w io.Writer) {
		for _, m := range st {
			state := "pending"
			if m.Applied {
				state = "applied " + m.AppliedAt
			}
			fmt.Fprintf(w, "%05d %-40s %s\n", m.Version, m.Name, state)
		}
	})
}
