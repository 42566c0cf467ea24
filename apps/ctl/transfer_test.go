package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/testenv"
)

func TestExportImportCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srcDB := testenv.Postgres(t)
	src := &cli{t: t, url: srcDB.OperatorURL(), owner: srcDB.URL}
	org := src.ok("org", "create", "--name", "acme")["id"].(string)
	agent := src.ok("agent", "create", "--org", org, "--name", "scout")["id"].(string)
	svc := knowledge.New(srcDB.Pool, knowledge.Options{})
	c := knowledge.Caller{OrgID: uuid.MustParse(org), AgentID: uuid.MustParse(agent)}
	var ids []uuid.UUID
	for _, title := range []string{"one", "two", "three"} {
		r, err := svc.Store(ctx, c, knowledge.StoreInput{Title: title, Body: "body of " + title, Tags: []string{"t-" + title}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	if _, err := svc.Supersede(ctx, c, ids[0], ids[1]); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "acme.jsonl")
	ex := src.ok("export", "--org", org, "--out", file)
	if ex["exported"].(map[string]any)["entries"].(float64) != 3 {
		t.Fatalf("export: %v", ex)
	}
	// To standard output, the file itself.
	code, stdout, _ := src.run("export", "--org", org)
	first, _ := os.ReadFile(file)
	if code != 0 || stdout != string(first) {
		t.Fatalf("export to stdout: %d, same as the file: %v", code, stdout == string(first))
	}

	dst := newCLI(t) // an empty database
	org2 := dst.ok("org", "create", "--name", "acme-restored")["id"].(string)
	im := dst.ok("import", "--org", org2, file)
	if im["imported"].(map[string]any)["entries"].(float64) != 3 {
		t.Fatalf("import: %v", im)
	}
	file2 := filepath.Join(dir, "restored.jsonl")
	dst.ok("export", "--org", org2, "--out", file2)
	second, _ := os.ReadFile(file2)
	if !bytes.Equal(first, second) {
		t.Fatalf("round trip differs:\n%s\n---\n%s", first, second)
	}
	again := dst.ok("import", "--file", file, "--org", org2)["imported"].(map[string]any)
	if again["entries"].(float64) != 0 || again["skipped"].(map[string]any)["entry: already present"].(float64) != 3 {
		t.Fatalf("second import: %v", again)
	}
	code, out, _ := dst.run("import", "--org", org2, file)
	if code != 0 || !strings.Contains(out, "skipped 3: entry: already present") {
		t.Fatalf("human output: %d %q", code, out)
	}

	// Errors name the flag.
	newer := filepath.Join(dir, "newer.jsonl")
	current := []byte(fmt.Sprintf(`"version":%d`, knowledge.ExportVersion))
	if !bytes.Contains(first, current) {
		t.Fatalf("the export's header lacks %s", current)
	}
	os.WriteFile(newer, bytes.Replace(first, current, []byte(`"version":99`), 1), 0o600)
	org3 := dst.ok("org", "create", "--name", "small")["id"].(string)
	dst.ok("quota", "set", "--org", org3, "--knowledge-stored", "2")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"import", "--org", org3, newer}, 1, "--file"},
		{[]string{"import", "--org", org3, file}, 1, "--ignore-quota"},
		{[]string{"import", "--org", org3}, 2, "--file"},
		{[]string{"import", "--org", org3, filepath.Join(dir, "missing.jsonl")}, 2, "--file"},
		{[]string{"export", "--org", "nope"}, 2, "--org"},
		{[]string{"export", "--org", org, "--json"}, 2, "--out"},
	} {
		code, _, errs := dst.run(tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d %q, want %d naming %s", tc.args, code, errs, tc.code, tc.want)
		}
	}
	if im := dst.ok("import", "--org", org3, file, "--ignore-quota"); im["imported"].(map[string]any)["entries"].(float64) != 3 {
		t.Fatalf("import --ignore-quota: %v", im)
	}
}
