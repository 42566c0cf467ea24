package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/agentfleet/orchestrator/db"
)

func init() {
	register("migrate up", "apply every pending migration", func(fs *flag.FlagSet) func(e *env) error {
		return func(e *env) error {
			p, err := e.db()
			if err != nil {
				return err
			}
			applied, err := db.Migrate(e.ctx, p)
			if err != nil {
				return err
			}
			return e.print(map[string]any{"applied": applied}, func(w io.Writer) {
				if len(applied) == 0 {
					fmt.Fprintln(w, "schema is up to date")
				}
				for _, m := range applied {
					fmt.Fprintf(w, "applied %05d %s\n", m.Version, m.Name)
				}
			})
		}
	})
	register("migrate status", "list migrations and whether they are applied", func(fs *flag.FlagSet) func(e *env) error {
		return func(e *env) error {
			p, err := e.db()
			if err != nil {
				return err
			}
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
