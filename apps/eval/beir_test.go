package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeBEIR writes a BEIR folder into a temp dir and returns its path.
func writeBEIR(t *testing.T, corpus, queries, qrels string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := os.MkdirAll(filepath.Join(dir, "qrels"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"corpus.jsonl": corpus, "queries.jsonl": queries, "qrels/test.tsv": qrels} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestReadBEIR(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 100_000) // longer than a default bufio.Scanner line
	dir := writeBEIR(t,
		`{"_id": "d1", "title": "Statins", "text": "Statins and breast cancer \u2013 a cohort.", "metadata": {"url": "u"}}
{"_id": "d2", "title": "", "text": "`+long+`"}
{"_id": "d3", "title": "Third", "text": "three"}
`,
		`{"_id": "q1", "text": "Do statins cause cancer?", "metadata": {}}
{"_id": "q2", "text": "unjudged query"}
{"_id": "q3", "text": "only a zero judgment"}
`,
		"query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td3\t1\nq3\td2\t0\n")
	ds, err := ReadBEIR(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ds.Name != "tiny" || len(ds.Docs) != 3 || len(ds.Queries) != 3 {
		t.Fatalf("got name %q, %d docs, %d queries", ds.Name, len(ds.Docs), len(ds.Queries))
	}
	if d := ds.Docs[0]; d.ID != "d1" || d.Title != "Statins" || d.Text != "Statins and breast cancer – a cohort." {
		t.Fatalf("doc 0 = %+v", d)
	}
	if len(ds.Docs[1].Text) != len(long) {
		t.Fatalf("long text cut to %d bytes", len(ds.Docs[1].Text))
	}
	if q := ds.Queries[0]; q.ID != "q1" || q.Text != "Do statins cause cancer?" {
		t.Fatalf("query 0 = %+v", q)
	}
	if got := ds.Qrels["q1"]; len(got) != 2 || got["d1"] != 2 || got["d3"] != 1 {
		t.Fatalf("qrels q1 = %v", got)
	}
	// q2 has no judgment: skipped. q3 has one (score 0): judged, nothing relevant.
	var ids []string
	for _, q := range ds.Judged() {
		ids = append(ids, q.ID)
	}
	if !slices.Equal(ids, []string{"q1", "q3"}) {
		t.Fatalf("judged = %v", ids)
	}
}

func TestReadBEIRErrors(t *testing.T) {
	t.Parallel()
	ok := `{"_id": "d1", "title": "t", "text": "x"}` + "\n"
	for name, files := range map[string][3]string{
		"duplicate doc": {ok + ok, `{"_id": "q1", "text": "q"}`, "q1\td1\t1\n"},
		"bad json":      {`{"_id": "d1",`, `{"_id": "q1", "text": "q"}`, "q1\td1\t1\n"},
		"bad score":     {ok, `{"_id": "q1", "text": "q"}`, "query-id\tcorpus-id\tscore\nq1\td1\tx\n"},
		"short qrel":    {ok, `{"_id": "q1", "text": "q"}`, "q1\td1\n"},
	} {
		if _, err := ReadBEIR(writeBEIR(t, files[0], files[1], files[2])); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := ReadBEIR(t.TempDir()); err == nil {
		t.Error("missing files: no error")
	}
}

func TestLimitKeepsJudgedDocsFirst(t *testing.T) {
	t.Parallel()
	ds := &Dataset{Name: "x",
		Docs:    []Doc{{ID: "u1"}, {ID: "u2"}, {ID: "j1"}, {ID: "u3"}, {ID: "j2"}, {ID: "j3"}},
		Queries: []Query{{ID: "q0"}, {ID: "q1"}, {ID: "q2"}},
		Qrels:   map[string]Judgments{"q1": {"j1": 1, "j2": 2}, "q2": {"j3": 1}},
	}
	if ds.Limit(0, 0) != ds {
		t.Fatal("no limit should return the dataset itself")
	}
	got := ds.Limit(1, 3) // q1 only; its judged docs j1, j2, then u1
	var docs []string
	for _, d := range got.Docs {
		docs = append(docs, d.ID)
	}
	if !slices.Equal(docs, []string{"j1", "j2", "u1"}) {
		t.Fatalf("docs = %v", docs)
	}
	if len(got.Queries) != 1 || got.Queries[0].ID != "q1" || len(got.Qrels["q1"]) != 2 || got.Qrels["q2"] != nil {
		t.Fatalf("queries %v, qrels %v", got.Queries, got.Qrels)
	}
	// Fewer docs than judged: the cut judgments are dropped, so recall is
	// measured against what was loaded.
	got = ds.Limit(0, 1)
	if len(got.Docs) != 1 || got.Docs[0].ID != "j1" {
		t.Fatalf("docs = %v", got.Docs)
	}
	if j := got.Judged(); len(j) != 1 || j[0].ID != "q1" || len(got.Qrels["q1"]) != 1 {
		t.Fatalf("judged %v, qrels %v", j, got.Qrels)
	}
}

func TestStoreInput(t *testing.T) {
	t.Parallel()
	in := storeInput(Doc{ID: "d", Title: "", Text: strings.Repeat("é", 300)})
	if n := len([]rune(in.Title)); n != 200 {
		t.Fatalf("title of %d runes, want 200", n)
	}
	in = storeInput(Doc{ID: "d", Title: "Only a title", Text: "  "})
	if in.Title != "Only a title" || in.Body != "Only a title" {
		t.Fatalf("got %+v", in)
	}
	in = storeInput(Doc{ID: "d", Title: "T", Text: strings.Repeat("b", 40000)})
	if len(in.Body) != 32000 {
		t.Fatalf("body of %d, want 32000", len(in.Body))
	}
}
