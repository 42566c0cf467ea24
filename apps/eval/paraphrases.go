package main

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
)

// The paraphrase study (part of eval --dups): does the duplicate check
// find the same fact said in other words, and leave alone a different
// fact on the same subject? NFCorpus gives no such pairs (a query and a
// document judged relevant to it are not paraphrases), so they are
// hand-written: testdata/paraphrases.jsonl holds 40 operational notes of
// the kind agents store (on-call, deploys, databases, CI, billing, ...),
// each with
//
//   - stored: the note as first stored;
//   - paraphrase: the same fact in other words (synonyms, another
//     sentence order, numbers spelled differently: "15 minutes" as "a
//     quarter of an hour"), written to share few words with it;
//   - distinct: another fact on the same subject (the same system or
//     team, a different rule), the hard negative.
//
// The stored notes are loaded into one org (and embedded, as the worker
// would); then each paraphrase and each distinct note is stored as a
// probe, its similar list read, and the probe forgotten. A paraphrase is
// found when its stored note is listed; anything else listed is wrong.
// The study also counts what ifSimilar: skip would do (the best listing
// at SkipThreshold or more).

//go:embed testdata/paraphrases.jsonl
var paraphrasesJSONL []byte

type paraNote struct {
	Title string `json:"title"`
	Body  string `json:"body"`
}

type paraItem struct {
	Topic      string   `json:"topic"`
	Stored     paraNote `json:"stored"`
	Paraphrase paraNote `json:"paraphrase"`
	Distinct   paraNote `json:"distinct"`
}

func paraphraseItems() ([]paraItem, error) {
	var out []paraItem
	sc := bufio.NewScanner(bytes.NewReader(paraphrasesJSONL))
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var it paraItem
		if err := json.Unmarshal(sc.Bytes(), &it); err != nil {
			return nil, fmt.Errorf("testdata/paraphrases.jsonl line %d: %w", len(out)+1, err)
		}
		out = append(out, it)
	}
	return out, sc.Err()
}

// ParaphraseReport is the paraphrase study's answer.
type ParaphraseReport struct {
	Notes      int           `json:"notes"`
	Categories []DupCategory `json:"categories"`
	Precision  float64       `json:"precision"`
	Recall     float64       `json:"recall"`
	// Checks counts the probes by how their check was made
	// (StoreResult.SimilarCheck).
	Checks map[string]int `json:"checks"`
	// SkipRight: paraphrases whose best listing was their note at
	// SkipThreshold or more (ifSimilar: skip would answer it); SkipWrong:
	// probes whose best listing at SkipThreshold or more was another note.
	SkipRight, SkipWrong int
	WrongExamples        []string `json:"wrongExamples"`
}

// paraphraseStudy runs the study in a fresh org of pool, through svc.
func paraphraseStudy(ctx context.Context, pool *pgxpool.Pool, emb embed.Embedder, svc *knowledge.Service, concurrency int, progress func(string, ...any)) (*ParaphraseReport, error) {
	items, err := paraphraseItems()
	if err != nil {
		return nil, err
	}
	c, err := newCaller(ctx, pool, "dups-paraphrases")
	if err != nil {
		return nil, err
	}
	docs := make([]Doc, len(items))
	for i, it := range items {
		docs[i] = Doc{ID: fmt.Sprint(i), Title: it.Stored.Title, Text: it.Stored.Body}
	}
	progress("dups: storing %d notes into the paraphrase org", len(docs))
	docOf, _, err := load(ctx, svc, c, docs, concurrency)
	if err != nil {
		return nil, err
	}
	// What the stores could not embed within the budget (and everything,
	// with an in-process embedder), the worker would.
	if err := embedAll(ctx, pool, emb, c.OrgID, docOf, concurrency); err != nil {
		return nil, err
	}
	if _, err := knowledge.NewMaintenance(svc, knowledge.MaintenanceConfig{}).IndexAll(ctx); err != nil {
		return nil, err
	}
	entryOf := make([]uuid.UUID, len(items))
	for id, d := range docOf {
		var i int
		fmt.Sscan(d, &i)
		entryOf[i] = id
	}
	rep := &ParaphraseReport{Notes: len(docOf), Checks: map[string]int{}}
	cats := []*DupCategory{{Org: "notes", Kind: "paraphrase", Positive: true}, {Org: "notes", Kind: "distinct"}}
	var scores [2][]float64
	for i, it := range items {
		for k, probe := range []paraNote{it.Paraphrase, it.Distinct} {
			best, err := rep.probe(ctx, svc, c, probe, cats[k], entryOf[i], it.Topic)
			if err != nil {
				return nil, err
			}
			if best >= 0 {
				scores[k] = append(scores[k], best)
			}
		}
	}
	var right, listings int
	for k, cat := range cats {
		cat.setScores(scores[k])
		rep.Categories = append(rep.Categories, *cat)
		listings += cat.Listings
		right += cat.Listings - cat.Wrong
	}
	rep.Precision = ratio(right, listings)
	rep.Recall = ratio(cats[0].Found, cats[0].Probes)
	return rep, nil
}

// probe stores one probe of a note (source: the note's entry), tallies
// what its store listed into cat, counts whether ifSimilar: skip would
// have answered it right, forgets it, and returns its best score (tally).
func (rep *ParaphraseReport) probe(ctx context.Context, svc *knowledge.Service, c knowledge.Caller, probe paraNote, cat *DupCategory, source uuid.UUID, topic string) (float64, error) {
	// The whole check before the answer, as the study measures it.
	r, err := svc.Store(ctx, c, knowledge.StoreInput{Title: probe.Title, Body: probe.Body, IfSimilar: knowledge.IfSimilarReport})
	if err != nil {
		return 0, fmt.Errorf("probe %s/%s: %w", topic, cat.Kind, err)
	}
	rep.Checks[r.SimilarCheck]++
	if len(r.Similar) > 0 && r.Similar[0].Score >= knowledge.SkipThreshold {
		if cat.Positive && r.Similar[0].ID == source {
			rep.SkipRight++
		} else {
			rep.SkipWrong++
		}
	}
	best := tally(cat, r.Similar, source, topic+"/"+cat.Kind, probe.Title, &rep.WrongExamples)
	if _, err := svc.Forget(ctx, c, r.ID, "paraphrase study probe", false); err != nil {
		return 0, err
	}
	return best, nil
}

// Text prints the study.
func (r *ParaphraseReport) Text(w io.Writer) error {
	fmt.Fprintf(w, "paraphrase pairs (apps/eval/testdata/paraphrases.jsonl): %d notes stored; checks %v\n", r.Notes, r.Checks)
	fmt.Fprintf(w, "%-6s %-10s %-8s %6s %6s %8s %6s  %s\n", "org", "kind", "label", "probes", "found", "listings", "wrong", "score p10/p50/p90")
	for _, c := range r.Categories {
		label, found := "distinct", "-"
		if c.Positive {
			label, found = "same", fmt.Sprint(c.Found)
		}
		fmt.Fprintf(w, "%-6s %-10s %-8s %6d %6s %8d %6d  %.2f/%.2f/%.2f\n", c.Org, c.Kind, label, c.Probes, found, c.Listings, c.Wrong, c.ScoreP10, c.ScoreP50, c.ScoreP90)
	}
	for _, e := range r.WrongExamples {
		fmt.Fprintln(w, "  wrong:", e)
	}
	_, err := fmt.Fprintf(w, "paraphrases: precision %.3f, recall %.3f; ifSimilar skip (score >= %.2f): %d paraphrases skipped to their note, %d probes skipped to another\n",
		r.Precision, r.Recall, knowledge.SkipThreshold, r.SkipRight, r.SkipWrong)
	return err
}
