package main

import (
	"bufio"
	"encoding/json"
	"os"

	"github.com/agentfleet/orchestrator/packages/knowledge"
)

// DumpQuery is one line of --dump: a query, its judgments, and what
// fusion was given for it (knowledge.Lists' candidates, ids as corpus
// ids), so that a change of fusion can be studied on these lines without
// loading and embedding the collection again.
type DumpQuery struct {
	ID           string             `json:"id"`
	Text         string             `json:"text"`
	Unanswerable bool               `json:"unanswerable,omitempty"`
	Qrels        Judgments          `json:"qrels"`
	QueryIDF     knowledge.QueryIDF `json:"queryIdf"`
	VectorSearch bool               `json:"vectorSearch"`
	Candidates   []DumpCandidate    `json:"candidates"`
	FusedDocs    []string           `json:"fused"`
	FusedScores  []float64          `json:"fusedScores"`
}

// DumpCandidate is a knowledge.Candidate named by its corpus id.
type DumpCandidate struct {
	Doc string `json:"doc"`
	knowledge.Candidate
}

// dump writes one DumpQuery per query to path, from the main scoring's
// lists (lists[i] belongs to queries[i]).
func dump(ds *Dataset, queries []Query, lists []docLists, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for i, q := range queries {
		l := lists[i]
		d := DumpQuery{ID: q.ID, Text: q.Text, Unanswerable: ds.Unanswerable[q.ID], Qrels: ds.Qrels[q.ID],
			QueryIDF: l.QueryIDF, VectorSearch: l.VectorSearch, Candidates: l.Candidates,
			FusedDocs: l.Fused, FusedScores: l.Scores}
		if err := enc.Encode(d); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
