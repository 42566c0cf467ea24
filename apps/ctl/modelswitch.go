package main

import (
	"fmt"
	"io"

	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// A model switch (docs/embeddings.md, "Model switch"): its progress, and
// its last step.

func runSwitchStatus(e *env, _ *noFlags) error {
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
	cov, err := knowledge.New(pool, knowledge.Options{Embedder: cur}).Operations().ModelSwitchCoverage(e.ctx, next)
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

func runSwitchFinish(e *env, _ *noFlags) error {
	emb, err := e.embedder()
	if err != nil {
		return err
	}
	pool, err := e.db()
	if err != nil {
		return err
	}
	moved, err := knowledge.New(pool, knowledge.Options{Embedder: emb}).Operations().FinishModelSwitch(e.ctx, knowledge.SpaceOf(emb))
	if err != nil {
		return err
	}
	return e.print(map[string]any{"model": emb.Model(), "entriesMoved": moved}, func(w io.Writer) {
		fmt.Fprintf(w, "%d entries now hold their %s vector; the other models' vectors are deleted\n", moved, emb.Model())
	})
}
