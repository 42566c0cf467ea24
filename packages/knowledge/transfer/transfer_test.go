package transfer_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/transferfmt"
	"github.com/agentfleet/orchestrator/packages/knowledge/transfer"
	"github.com/agentfleet/orchestrator/packages/testenv"
	"github.com/agentfleet/orchestrator/packages/testenv/testfactory"
)

// The transfer alone, on entries written with plain SQL (testfactory):
// an export imported into another org exports the same bytes, a second
// import skips everything, and a newer format is refused. The round trip
// of a whole org (chains, links, relations, documents, vectors, the
// duplicate check after an import) is tested through the facade in
// package knowledge.
func TestExportImportAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.Postgres(t)
	tr := transfer.New(data.New(db.Pool), transfer.Options{})
	org := testfactory.Org(ctx, t, db.Pool, nil).ID
	agent := testfactory.Agent(ctx, t, db.Pool, &testfactory.AgentOpts{OrgID: org}).ID
	for _, title := range []string{"first", "second", "third"} {
		testfactory.Entry(ctx, t, db.Pool, &testfactory.EntryOpts{OrgID: org, AgentID: agent, Title: title, Tags: []string{"t"}})
	}
	export := func(org uuid.UUID) ([]byte, *domain.ExportReport) {
		t.Helper()
		var buf bytes.Buffer
		rep, err := tr.Export(data.AsOrg(ctx, org), org, &buf, domain.ExportOptions{PageSize: 2})
		if err != nil {
			t.Fatal(err)
		}
		return buf.Bytes(), rep
	}
	open := func(b []byte) func() (io.ReadCloser, error) {
		return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	first, rep := export(org)
	if rep.Entries != 3 || rep.Agents != 1 {
		t.Fatalf("export: %+v", rep)
	}
	to := testfactory.Org(ctx, t, db.Pool, nil).ID
	irep, err := tr.Import(data.AsOrg(ctx, to), to, open(first), domain.ImportOptions{})
	if err != nil || irep.Entries != 3 || irep.Agents != 1 || len(irep.Skipped) != 0 {
		t.Fatalf("import: %+v %v", irep, err)
	}
	if second, _ := export(to); !bytes.Equal(first, second) {
		t.Fatalf("export -> import -> export differs:\n%s\n---\n%s", first, second)
	}
	again, err := tr.Import(data.AsOrg(ctx, to), to, open(first), domain.ImportOptions{})
	if err != nil || again.Entries+again.Agents != 0 || again.Skipped["entry: already present"] != 3 {
		t.Fatalf("second import: %+v %v", again, err)
	}
	newer := bytes.Replace(first, []byte(`"version":`), []byte(`"version":99,"was":`), 1)
	if _, err := tr.Import(data.AsOrg(ctx, to), to, open(newer), domain.ImportOptions{}); !errors.Is(err, transferfmt.ErrNewerFormat) {
		t.Fatalf("import of a newer version: %v", err)
	}
}
