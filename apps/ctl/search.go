package main

import (
	"flag"
	"fmt"
	"io"
	"slices"

	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// The lexical index of an org: which text search configuration (language)
// it is built with, how far the indexer is, and moving an org to another
// language (packages/knowledge/maintenance/language.go says how that is served).

func runSearchStatus(e *env, f *orgFlags) error {
	orgID, err := f.orgID()
	if err != nil {
		return err
	}
	svc, err := e.knowledge()
	if err != nil {
		return err
	}
	st, err := svc.Operations().SearchIndexStatus(e.ctx, orgID)
	if err != nil {
		return err
	}
	return e.print(st, func(w io.Writer) { printSearchStatus(w, st) })
}

func printSearchStatus(w io.Writer, st *knowledge.SearchIndexStatus) {
	cfg := st.TextSearchConfig
	if cfg == "" {
		cfg = "(none yet: the deployment's on first index)"
	}
	fmt.Fprintf(w, "language %s, %d entries indexed, %d queued\n", cfg, st.Indexed, st.Queued)
	if !slices.ContainsFunc(st.VectorIndexes, func(ix knowledge.VectorIndexState) bool { return ix.Pair == "" }) {
		fmt.Fprintf(w, "vector index of its own: none (Upkeep builds one for an org of %d entries or more that is at most half of the table; until then its vector list uses the shared index or scans its vectors)\n",
			knowledge.OrgVectorIndexMinDocs)
	}
	for _, ix := range st.VectorIndexes {
		state := "valid"
		if !ix.Valid {
			state = "not valid yet: being built, or a failed build that Upkeep drops and builds again"
		}
		if ix.Pair != "" {
			fmt.Fprintf(w, "vector index of its metadata pair %s: %s (%s)\n", ix.Pair, ix.Name, state)
			continue
		}
		fmt.Fprintf(w, "vector index of its own: %s (%s)\n", ix.Name, state)
	}
}

type searchLanguageFlags struct {
	orgFlags
	config string
}

func (f *searchLanguageFlags) define(fs *flag.FlagSet) {
	f.orgFlags.define(fs)
	fs.StringVar(&f.config, "config", "", "PostgreSQL text search configuration, e.g. english, german, french, simple")
}

func runSearchLanguage(e *env, f *searchLanguageFlags) error {
	orgID, err := f.orgID()
	if err != nil {
		return err
	}
	if f.config == "" {
		return usagef("--config is required (a text search configuration such as english, german, simple)")
	}
	svc, err := e.knowledge()
	if err != nil {
		return err
	}
	n, err := svc.Operations().SetTextSearchConfig(e.ctx, orgID, f.config)
	if err != nil {
		return err
	}
	out := map[string]any{"orgId": orgID, "textSearchConfig": f.config, "queued": n}
	return e.print(out, func(w io.Writer) {
		fmt.Fprintf(w, "%d entries queued for the indexer (the worker rebuilds the index in %s)\n", n, f.config)
	})
}

// knowledge is the knowledge service on the command's database, for
// operator commands that do not search or store (no embedder needed).
func (e *env) knowledge() (*knowledge.Service, error) {
	p, err := e.db()
	if err != nil {
		return nil, err
	}
	return knowledge.New(p, knowledge.Options{}), nil
}
