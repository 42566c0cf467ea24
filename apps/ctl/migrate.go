package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/agentfleet/orchestrator/db"
)

func init() {
	register("migrate up", "apply every pending migration (as the schema owner, OWNER_DATABASE_URL), then make or check the application's and the operator's roles and grant their privileges", func(fs *flag.FlagSet) func(e *env) error {
		return func(e *env) error {
			cfg := e.config()
			ownerURL := cfg.String("OWNER_DATABASE_URL", db.DefaultOwnerURL)
			roles := db.Roles{
				App:      cfg.String("DB_APP_ROLE", db.DefaultAppRole),
				Operator: cfg.String("DB_OPERATOR_ROLE", db.DefaultOperatorRole),
			}
			if err := roles.Check(); err != nil {
				return fmt.Errorf("DB_APP_ROLE / DB_OPERATOR_ROLE: %w", err)
			}
			p, err := db.Open(e.ctx, ownerURL)
			if err != nil {
				return fmt.Errorf("OWNER_DATABASE_URL: %w", err)
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
	})
	register("migrate status", "list migrations and whether they are applied (as the schema owner, OWNER_DATABASE_URL)", func(fs *flag.FlagSet) func(e *env) error {
		return func(e *env) error {
			p, err := db.Open(e.ctx, e.config().String("OWNER_DATABASE_URL", db.DefaultOwnerURL))
			if err != nil {
				return fmt.Errorf("OWNER_DATABASE_URL: %w", err)
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
	})
}
