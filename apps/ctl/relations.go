package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// An org's own relation types (issue 26): the built-in catalogue
// (knowledge.BuiltinRelationTypes) plus what an operator adds here.
func init() {
	register("relation-type add", "add an org's own relation type: --org ORG --name NAME (--inverse NAME | --symmetric)", func(fs *flag.FlagSet) func(e *env) error {
		org := fs.String("org", "", "org id")
		name := fs.String("name", "", "the type's name, UPPER_SNAKE_CASE, 2 to 48 characters (e.g. BLOCKS)")
		inverse := fs.String("inverse", "", "the name read from the other end (e.g. BLOCKED_BY)")
		symmetric := fs.Bool("symmetric", false, "the type reads the same from both ends (no --inverse)")
		return func(e *env) error {
			orgID, err := uuidFlag("org", *org)
			if err != nil {
				return err
			}
			if err := required("name", *name); err != nil {
				return err
			}
			if *inverse == "" && !*symmetric {
				return usagef("give --inverse NAME, or --symmetric for a type that reads the same from both ends")
			}
			if *inverse != "" && *symmetric {
				return usagef("give --inverse or --symmetric, not both")
			}
			svc, err := e.knowledge()
			if err != nil {
				return err
			}
			t, err := svc.AddRelationType(e.ctx, orgID, *name, *inverse, *symmetric)
			if err != nil {
				return err
			}
			return e.print(t, func(w io.Writer) {
				if t.Symmetric {
					fmt.Fprintf(w, "relation type %s (symmetric) added\n", t.Name)
					return
				}
				fmt.Fprintf(w, "relation type %s (inverse %s) added\n", t.Name, t.Inverse)
			})
		}
	})
	register("relation-type list", "an org's relation types, built-in and its own: --org ORG", func(fs *flag.FlagSet) func(e *env) error {
		org := fs.String("org", "", "org id")
		return func(e *env) error {
			orgID, err := uuidFlag("org", *org)
			if err != nil {
				return err
			}
			svc, err := e.knowledge()
			if err != nil {
				return err
			}
			types, err := svc.RelationTypes(e.ctx, knowledge.Caller{OrgID: orgID})
			if err != nil {
				return err
			}
			return e.print(types, func(w io.Writer) {
				for _, t := range types {
					kind := "org's own"
					if t.Builtin {
						kind = "built-in"
					}
					switch {
					case t.ReadOnly:
						kind += ", read only (supersede_knowledge)"
					case t.Symmetric:
						kind += ", symmetric"
					}
					fmt.Fprintf(w, "%-16s %-16s %s\n", t.Name, t.Inverse, kind)
				}
			})
		}
	})
}
