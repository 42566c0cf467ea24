package main

import (
	"cmp"
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

type exportFlags struct {
	orgFlags
	out     string
	vectors bool
}

func (f *exportFlags) define(fs *flag.FlagSet) {
	f.orgFlags.define(fs)
	fs.StringVar(&f.out, "out", "", "file to write (default: standard output)")
	fs.BoolVar(&f.vectors, "vectors", false, "include the vectors of embedded entries")
}

func runExport(e *env, f *exportFlags) error {
	orgID, err := f.orgID()
	if err != nil {
		return err
	}
	if f.out == "" && e.json {
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
	var rep *knowledge.ExportReport
	export := func(w io.Writer) (err error) {
		prog, done := e.progress("exported")
		defer done()
		rep, err = svc.Operations().Export(e.ctx, orgID, w, knowledge.ExportOptions{Vectors: f.vectors, Progress: prog})
		return err
	}
	if f.out == "" {
		if err := export(e.stdout); err != nil {
			return err
		}
		fmt.Fprintf(e.stderr, "exported %d entries, %d agents, %d tasks, %d supersessions, %d task links, %d vectors, %d documents, %d sections\n",
			rep.Entries, rep.Agents, rep.Tasks, rep.Supersessions, rep.TaskLinks, rep.Vectors, rep.Documents, rep.Sections)
		return nil
	}
	if err := writeFile(f.out, export); err != nil {
		return err
	}
	return e.print(map[string]any{"orgId": orgID, "file": f.out, "exported": rep}, func(w io.Writer) {
		fmt.Fprintf(w, "exported %d entries, %d agents, %d tasks, %d supersessions, %d task links, %d vectors, %d documents, %d sections to %s\n",
			rep.Entries, rep.Agents, rep.Tasks, rep.Supersessions, rep.TaskLinks, rep.Vectors, rep.Documents, rep.Sections, f.out)
	})
}

// writeFile has write fill a file next to path and renames it to path at
// the end, so a failed export never leaves a truncated file under the name.
// Errors of the file itself name --out.
func writeFile(path string, write func(w io.Writer) error) error {
	f, err := os.CreateTemp(dirOf(path), ".export-*.jsonl")
	if err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if err := write(f); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	return nil
}

type importFlags struct {
	orgFlags
	file        string
	ignoreQuota bool
}

func (f *importFlags) define(fs *flag.FlagSet) {
	f.orgFlags.define(fs)
	fs.StringVar(&f.file, "file", "", "the export file (JSON Lines)")
	fs.BoolVar(&f.ignoreQuota, "ignore-quota", false, "import even past the org's knowledge_stored quota (the entries are still counted)")
}

func runImport(e *env, f *importFlags) error {
	orgID, err := f.orgID()
	if err != nil {
		return err
	}
	file := cmp.Or(f.file, e.arg)
	if file == "" {
		return usagef("--file is required (or give the file as the last argument)")
	}
	if _, err := os.Stat(file); err != nil {
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
	rep, err := svc.Operations().Import(e.ctx, orgID, func() (io.ReadCloser, error) { return os.Open(file) }, knowledge.ImportOptions{IgnoreQuota: f.ignoreQuota, Progress: prog})
	done()
	if errors.Is(err, knowledge.ErrNewerFormat) {
		return fmt.Errorf("--file: %w", err)
	}
	if err != nil {
		return err
	}
	return e.print(map[string]any{"orgId": orgID, "imported": rep}, func(w io.Writer) {
		fmt.Fprintf(w, "imported %d entries (%d with vectors), %d agents, %d tasks, %d chains, %d supersessions, %d task links, %d documents, %d sections\n",
			rep.Entries, rep.Vectors, rep.Agents, rep.Tasks, rep.Chains, rep.Supersessions, rep.TaskLinks, rep.Documents, rep.Sections)
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

func dirOf(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if os.IsPathSeparator(path[i]) {
			return path[:i+1]
		}
	}
	return "."
}
