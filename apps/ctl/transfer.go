package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"

	"golang.org/x/term"

	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// progress returns a callback that rewrites one line on standard error when
// it is a terminal (and nothing otherwise, so logs and pipes stay clean).
func (e *env) progress(verb string) (func(int64), func()) {
	f, ok := e.stderr.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil, func() {}
	}
	return func(n int64) { fmt.Fprintf(f, "\r%s %d entries", verb, n) },
		func() { fmt.Fprint(f, "\r\033[K") }
}

// Export and import (packages/knowledge/transfer.go has the format and the
// guarantees; docs/operators.md the guide).
func init() {
	register("export", "write an org's knowledge as JSON Lines: --org ORG [--out FILE] [--vectors]", func(fs *flag.FlagSet) func(e *env) error {
		org := fs.String("org", "", "org id")
		out := fs.String("out", "", "file to write (default: standard output)")
		vectors := fs.Bool("vectors", false, "include the vectors of embedded entries")
		return func(e *env) error {
			orgID, err := uuidFlag("org", *org)
			if err != nil {
				return err
			}
			if *out == "" && e.json {
				return usagef("--json needs --out FILE: the export itself goes to standard output otherwise")
			}
			t, err := e.tenancy()
			if err != nil {
				return err
			}
			if _, err := t.ListAgents(e.ctx, orgID); err != nil { // the org must exist
				return err
			}
			svc, err := e.knowledge()
			if err != nil {
				return err
			}
			var w io.Writer = e.stdout
			var f *os.File
			if *out != "" {
				// Written next to the target and renamed at the end, so a
				// failed export never leaves a truncated file under the name.
				f, err = os.CreateTemp(dirOf(*out), ".export-*.jsonl")
				if err != nil {
					return fmt.Errorf("--out: %w", err)
				}
				defer os.Remove(f.Name())
				defer f.Close()
				w = f
			}
			prog, done := e.progress("exported")
			rep, err := svc.Export(e.ctx, orgID, w, knowledge.ExportOptions{Vectors: *vectors, Progress: prog})
			done()
			if err != nil {
				return err
			}
			if f != nil {
				if err := f.Sync(); err != nil {
					return fmt.Errorf("--out: %w", err)
				}
				if err := f.Close(); err != nil {
					return fmt.Errorf("--out: %w", err)
				}
				if err := os.Rename(f.Name(), *out); err != nil {
					return fmt.Errorf("--out: %w", err)
				}
			}
			if *out == "" {
				fmt.Fprintf(e.stderr, "exported %d entries, %d agents, %d tasks, %d supersessions, %d task links, %d vectors\n",
					rep.Entries, rep.Agents, rep.Tasks, rep.Supersessions, rep.TaskLinks, rep.Vectors)
				return nil
			}
			return e.print(map[string]any{"orgId": orgID, "file": *out, "exported": rep}, func(w io.Writer) {
				fmt.Fprintf(w, "exported %d entries, %d agents, %d tasks, %d supersessions, %d task links, %d vectors to %s\n",
					rep.Entries, rep.Agents, rep.Tasks, rep.Supersessions, rep.TaskLinks, rep.Vectors, *out)
			})
		}
	})
	register("import", "read an export into an org: --org ORG FILE [--ignore-quota] (or --file FILE)", func(fs *flag.FlagSet) func(e *env) error {
		org := fs.String("org", "", "org id")
		file := fs.String("file", "", "the export file (JSON Lines)")
		ignoreQuota := fs.Bool("ignore-quota", false, "import even past the org's knowledge_stored quota (the entries are still counted)")
		return func(e *env) error {
			orgID, err := uuidFlag("org", *org)
			if err != nil {
				return err
			}
			if *file == "" {
				*file = e.arg
			}
			if *file == "" {
				return usagef("--file is required (or give the file as the last argument)")
			}
			if _, err := os.Stat(*file); err != nil {
				return usagef("--file: %v", err)
			}
			t, err := e.tenancy()
			if err != nil {
				return err
			}
			if _, err := t.ListAgents(e.ctx, orgID); err != nil {
				return err
			}
			svc, err := e.knowledge()
			if err != nil {
				return err
			}
			prog, done := e.progress("read")
			rep, err := svc.Import(e.ctx, orgID, func() (io.ReadCloser, error) { return os.Open(*file) }, knowledge.ImportOptions{IgnoreQuota: *ignoreQuota, Progress: prog})
			done()
			if errors.Is(err, knowledge.ErrNewerFormat) {
				return fmt.Errorf("--file: %w", err)
			}
			if err != nil {
				return err
			}
			return e.print(map[string]any{"orgId": orgID, "imported": rep}, func(w io.Writer) {
				fmt.Fprintf(w, "imported %d entries (%d with vectors), %d agents, %d tasks, %d chains, %d supersessions, %d task links\n",
					rep.Entries, rep.Vectors, rep.Agents, rep.Tasks, rep.Chains, rep.Supersessions, rep.TaskLinks)
				reasons := make([]string, 0, len(rep.Skipped))
				for r := range rep.Skipped {
					reasons = append(reasons, r)
				}
				sort.Strings(reasons)
				for _, r := range reasons {
					fmt.Fprintf(w, "skipped %d: %s\n", rep.Skipped[r], r)
				}
			})
		}
	})
}

func dirOf(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if os.IsPathSeparator(path[i]) {
			return path[:i+1]
		}
	}
	return "."
}
