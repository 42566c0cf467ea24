package main

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Doc is one document of a BEIR corpus.
type Doc struct {
	ID    string `json:"_id"`
	Title string `json:"title"`
	Text  string `json:"text"`
}

// Query is one query of a BEIR query file.
type Query struct {
	ID   string `json:"_id"`
	Text string `json:"text"`
}

// Dataset is a BEIR test collection as read from its folder. Queries keep
// the file's order, Docs the corpus order, so runs are reproducible.
type Dataset struct {
	Name    string
	Docs    []Doc
	Queries []Query
	// Qrels maps query id -> doc id -> graded score, every line of the
	// file, 0 included: a score of 0 is "judged, not relevant", which only
	// matters for deciding which queries are judged at all.
	Qrels map[string]Judgments
	// Unanswerable marks the queries none of whose relevant documents is
	// in the corpus (VariantUnanswerable); they are judged but left out
	// of the ranking figures, and the score study tells them apart.
	Unanswerable map[string]bool
}

// ReadBEIR reads dir/corpus.jsonl, dir/queries.jsonl and dir/qrels/test.tsv,
// the layout every BEIR dataset ships in.
func ReadBEIR(dir string) (*Dataset, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	ds := &Dataset{Name: filepath.Base(abs)}
	seen := map[string]bool{}
	err = readJSONL(filepath.Join(dir, "corpus.jsonl"), func(d Doc) error {
		if d.ID == "" {
			return errors.New("document without _id")
		}
		if seen[d.ID] {
			return fmt.Errorf("document %q appears twice", d.ID)
		}
		seen[d.ID] = true
		ds.Docs = append(ds.Docs, d)
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = readJSONL(filepath.Join(dir, "queries.jsonl"), func(q Query) error {
		if q.ID == "" {
			return errors.New("query without _id")
		}
		ds.Queries = append(ds.Queries, q)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if ds.Qrels, err = readQrels(filepath.Join(dir, "qrels", "test.tsv")); err != nil {
		return nil, err
	}
	return ds, nil
}

// readJSONL decodes one JSON object after another. json.Decoder reads a
// stream of values, so no line-length limit applies to long documents.
func readJSONL[T any](path string, each func(T) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	for {
		var v T
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: near byte %d: %w", path, dec.InputOffset(), err)
		}
		if err := each(v); err != nil {
			return fmt.Errorf("%s: near byte %d: %w", path, dec.InputOffset(), err)
		}
	}
}

// readQrels reads a tab-separated `query-id corpus-id score` file; the
// header line is optional. A repeated pair keeps its last score, as BEIR's
// loader does.
func readQrels(path string) (map[string]Judgments, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.Comma = '\t'
	r.FieldsPerRecord = 3
	r.LazyQuotes = true
	r.ReuseRecord = true
	out := map[string]Judgments{}
	for first := true; ; first = false {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		score, err := strconv.Atoi(strings.TrimSpace(rec[2]))
		if err != nil {
			if first {
				continue // the header
			}
			line, _ := r.FieldPos(2)
			return nil, fmt.Errorf("%s:%d: score %q is not an integer", path, line, rec[2])
		}
		q, d := strings.TrimSpace(rec[0]), strings.TrimSpace(rec[1])
		if out[q] == nil {
			out[q] = Judgments{}
		}
		out[q][d] = score
	}
}

// Judged returns the queries that have at least one judgment line, in file
// order; the others cannot be scored and are skipped, as trec_eval does.
func (ds *Dataset) Judged() []Query {
	var out []Query
	for _, q := range ds.Queries {
		if len(ds.Qrels[q.ID]) > 0 {
			out = append(out, q)
		}
	}
	return out
}

// Limit cuts the dataset for a quick run: the first maxQueries judged
// queries, and at most maxDocs documents, those judged for the kept queries
// first (corpus order), then the rest of the corpus in order. Judgments of
// documents that were cut are dropped, so a limited run still scores the
// ranking of what was loaded; its figures are not comparable with the
// full collection's. Zero means no limit.
func (ds *Dataset) Limit(maxQueries, maxDocs int) *Dataset {
	if maxQueries <= 0 && maxDocs <= 0 {
		return ds
	}
	out := &Dataset{Name: ds.Name, Queries: ds.Judged(), Qrels: map[string]Judgments{}, Unanswerable: ds.Unanswerable}
	if maxQueries > 0 && len(out.Queries) > maxQueries {
		out.Queries = out.Queries[:maxQueries]
	}
	judged := map[string]bool{}
	for _, q := range out.Queries {
		for d := range ds.Qrels[q.ID] {
			judged[d] = true
		}
	}
	if maxDocs <= 0 || maxDocs >= len(ds.Docs) {
		out.Docs = ds.Docs
	} else {
		out.Docs = make([]Doc, 0, maxDocs)
		for _, pass := range []bool{true, false} {
			for _, d := range ds.Docs {
				if len(out.Docs) == maxDocs {
					break
				}
				if judged[d.ID] == pass {
					out.Docs = append(out.Docs, d)
				}
			}
		}
	}
	kept := make(map[string]bool, len(out.Docs))
	for _, d := range out.Docs {
		kept[d.ID] = true
	}
	for _, q := range out.Queries {
		for d, s := range ds.Qrels[q.ID] {
			if kept[d] {
				if out.Qrels[q.ID] == nil {
					out.Qrels[q.ID] = Judgments{}
				}
				out.Qrels[q.ID][d] = s
			}
		}
	}
	return out
}

// WriteBEIR writes the dataset to dir in the BEIR layout ReadBEIR reads:
// corpus.jsonl, queries.jsonl and qrels/test.tsv, every judgment line.
func (ds *Dataset) WriteBEIR(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "qrels"), 0o755); err != nil {
		return err
	}
	write := func(name string, each func(w *bufio.Writer) error) error {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		w := bufio.NewWriter(f)
		if err := each(w); err != nil {
			f.Close()
			return err
		}
		return errors.Join(w.Flush(), f.Close())
	}
	jsonl := func(items []any) func(w *bufio.Writer) error {
		return func(w *bufio.Writer) error {
			enc := json.NewEncoder(w)
			for _, it := range items {
				if err := enc.Encode(it); err != nil {
					return err
				}
			}
			return nil
		}
	}
	docs := make([]any, len(ds.Docs))
	for i, d := range ds.Docs {
		docs[i] = d
	}
	queries := make([]any, len(ds.Queries))
	for i, q := range ds.Queries {
		queries[i] = q
	}
	if err := write("corpus.jsonl", jsonl(docs)); err != nil {
		return err
	}
	if err := write("queries.jsonl", jsonl(queries)); err != nil {
		return err
	}
	return write("qrels/test.tsv", func(w *bufio.Writer) error {
		fmt.Fprintln(w, "query-id\tcorpus-id\tscore")
		for _, q := range ds.Queries {
			j := ds.Qrels[q.ID]
			ids := make([]string, 0, len(j))
			for d := range j {
				ids = append(ids, d)
			}
			slices.Sort(ids)
			for _, d := range ids {
				fmt.Fprintf(w, "%s\t%s\t%d\n", q.ID, d, j[d])
			}
		}
		return nil
	})
}
