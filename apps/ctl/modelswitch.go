package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// A model switch (docs/embeddings.md, "Model switch"): its progress, and
// its last step.
func init() {
	register("embeddings switch-status", "a model switch's progress per org (EMBEDDINGS_NEXT_* names the next model)", func(fs *flag.FlagSet) func(e *env) error {
		return func(e *env) error {
			next, err := e.nextEmbedder()
			if err != nil {
				return err
			}
			pool, err := e.db()
			if err != nil {
				return err
			}
			cur, err := e.embedder()
			if err != nil {
				return err
			}
			cov, err := knowledge.New(pool, knowledge.Options{Embedder: cur}).ModelSwitchCoverage(e.ctx, next)
			if err != nil {
				return err
			}
			return e.print(map[string]any{"model": cur.Model(), "nextModel": next.Model(), "orgs": cov}, func(w io.Writer) {
				fmt.Fprintf(w, "switch from %s to %s\n", cur.Model(), next.Model())
				for _, c := range cov {
					state := "served by the current model"
					if c.CutOver {
						state = "cut over"
					}
					fmt.Fprintf(w, "%s  %d of %d entries have the next model's vectors  %s\n", c.OrgID, c.Covered, c.WithVector, state)
				}
			})
		}
	})
	register("embeddings switch-finish", "end a model switch every org has cut over in: run with the next model configured as EMBEDDINGS_MODEL", func(fs *flag.FlagSet) func(e *env) error {
		return func(e *env) error {
			emb, err := e.embedder()
			if err != nil {
				return err
			}
			pool, err := e.db()
			if err != nil {
				return err
			}
			moved, err := knowledge.New(pool, knowledge.Options{Embedder: emb}).FinishModelSwitch(e.ctx, knowledge.SpaceOf(emb))
			if err != nil {
				return err
			}
			return e.print(map[string]any{"model": emb.Model(), "entriesMoved": moved}, func(w io.Writer) {
				fmt.Fprintf(w, "%d entries now hold their %s vector; the other models' vectors are deleted\n", moved, emb.Model())
			})
		}
	})
}
