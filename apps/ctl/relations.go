package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// An org's own relation types: the built-in catalogue
// (knowledge.BuiltinRelationTypes) plus what an operator adds here.

type relationTypeAddFlags struct {
	orgFlags
	name, inverse string
	symmetric     bool
}

func (f *relationTypeAddFlags) define(fs *flag.FlagSet) {
	f.orgFlags.define(fs)
	fs.StringVar(&f.name, "name", "", "the type's name, UPPER_SNAKE_CASE of 2 to 48 characters once normalised as tags are (blocks and Blocks are BLOCKS, blocked-by is BLOCKED_BY)")
	fs.StringVar(&f.inverse, "inverse", "", "the name read from the other end (e.g. BLOCKED_BY)")
	fs.BoolVar(&f.symmetric, "symmetric", false, "the type reads the same from both ends (no --inverse)")
}

func runRelationTypeAdd(e *env, f *relationTypeAddFlags) error {
	orgID, err := f.orgID()
	if err != nil {
		return err
	}
	if err := required("name", f.name); err != nil {
		return err
	}
	if f.inverse == "" && !f.symmetric {
		return usagef("give --inverse NAME, or --symmetric for a type that reads the same from both ends")
	}
	if f.inverse != "" && f.symmetric {
		return usagef("give --inverse or --symmetric, not both")
	}
	svc, err := e.knowledge()
	if err != nil {
		return err
	}
	t, err := svc.Operations().AddRelationType(e.ctx, orgID, f.name, f.inverse, f.symmetric)
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

func runRelationTypeList(e *env, f *orgFlags) error {
	orgID, err := f.orgID()
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
