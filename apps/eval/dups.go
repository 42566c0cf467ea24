package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/embed"
)

// The duplicate study (eval --dups): how well store_knowledge's similar
// list tells near-duplicates from distinct entries, end to end through
// Service.Store, on pairs built from a BEIR corpus.
//
// Two orgs are loaded from the corpus: "long" holds the documents as they
// are (title and abstract), "short" holds what agents mostly store (the
// title and the first sentence). A twelfth of the documents is held out of
// both. Then every probe is stored into an org, its similar list read, and
// the probe forgotten again (so probes never see each other):
//
//   - positives: a variant of a loaded document, built the way agents
//     restate knowledge: "restated" (sentences shuffled, one dropped),
//     "extended" (a sentence added: the second of a held-out document, so
//     no entry of the org holds it), "trimmed" (the
//     first 60% of the sentences), "edited" (a new title from the first
//     sentence, a tenth of the words dropped), "reworded" (short org:
//     title words shuffled, a fifth of the body's words dropped), "halved"
//     (short org: the first half of the body); and "real": the corpus's
//     own duplicates (documents with the same title, one loaded and one
//     held out). A positive is found when its source is listed.
//   - negatives: the held-out documents, distinct entries, most of them on
//     subjects the loaded documents cover (NFCorpus documents come in
//     clusters around the same nutrition questions). Anything listed for
//     a negative is a false listing.
//
// Precision is right listings over all listings; recall is found positives
// over positives.

const (
	dupSeed    = 20261124
	dupHoldout = 12  // one document in dupHoldout is held out
	dupPerCat  = 100 // positives per synthetic category and org
)

// DupCategory is the outcome of one kind of probe.
type DupCategory struct {
	Org      string `json:"org"`
	Kind     string `json:"kind"`
	Positive bool   `json:"positive"`
	Probes   int    `json:"probes"`
	Found    int    `json:"found"`    // positives: the source was listed
	Listings int    `json:"listings"` // entries listed in all
	Wrong    int    `json:"wrong"`    // listings that are not the source
	// Scores of the source (positives) or of the best listing (negatives)
	// at the 10th, 50th and 90th percentile of the probes that had one.
	ScoreP10, ScoreP50, ScoreP90 float64
}

// DupReport is the study's answer.
type DupReport struct {
	Categories []DupCategory `json:"categories"`
	Precision  float64       `json:"precision"`
	Recall     float64       `json:"recall"`
	Threshold  float64       `json:"threshold"`
	// StoreP50Ms and StoreP99Ms: Service.Store of the probes, the check
	// included, in the long org.
	StoreP50Ms, StoreP99Ms float64
	// PlainP50Ms and PlainP99Ms: the same stores without the check.
	PlainP50Ms, PlainP99Ms float64
	LongDocs, ShortDocs    int
	LongProbes             int
	// WrongExamples: the first listings that were not the probe's source.
	WrongExamples []string `json:"wrongExamples"`
	// Embedder is the model of the meaning check; Checks counts the
	// NFCorpus probes by how their check was made (SimilarCheck).
	Embedder    string                      `json:"embedder"`
	Calibration knowledge.VectorCalibration `json:"calibration"`
	Checks      map[string]int              `json:"checks"`
	// Paraphrases is the hand-written pair study (paraphrases.go).
	Paraphrases *ParaphraseReport `json:"paraphrases,omitempty"`
}

type dupProbe struct {
	kind     string
	positive bool
	source   uuid.UUID // the loaded entry a positive restates
	in       knowledge.StoreInput
}

var sentenceEnd = regexp.MustCompile(`[.!?]\s+`)

func sentences(t string) []string {
	var out []string
	last := 0
	for _, m := range sentenceEnd.FindAllStringIndex(t, -1) {
		out = append(out, strings.TrimSpace(t[last:m[1]]))
		last = m[1]
	}
	if rest := strings.TrimSpace(t[last:]); rest != "" {
		out = append(out, rest)
	}
	return out
}

func shortDoc(d Doc) Doc {
	s := sentences(d.Text)
	if len(s) > 0 {
		d.Text = s[0]
	}
	return d
}

func dropWords(rng *rand.Rand, t string, p float64) string {
	var kept []string
	for _, w := range strings.Fields(t) {
		if rng.Float64() >= p {
			kept = append(kept, w)
		}
	}
	return strings.Join(kept, " ")
}

// runDups is eval --dups: the study on a scratch database, its report on
// stdout.
func runDups(ctx context.Context, pool *pgxpool.Pool, emb embed.Embedder, ds *Dataset, cfg config, env settings, stdout io.Writer, progress func(string, ...any)) error {
	long, err := newCaller(ctx, pool, "dups-long")
	if err != nil {
		return err
	}
	short, err := newCaller(ctx, pool, "dups-short")
	if err != nil {
		return err
	}
	// The embed budget of the check (the answers' checks are counted), and
	// the operator's calibration of the model: the meaning score's scale.
	budget, cal := env.budget, env.calibration
	svc := knowledge.New(pool, knowledge.Options{Embedder: emb, Config: knowledge.Config{QueryEmbedBudget: budget, EmbedTimeout: budget, VectorCalibration: cal}})
	plain := knowledge.New(pool, knowledge.Options{Embedder: emb, Config: knowledge.Config{QueryEmbedBudget: budget, VectorCalibration: cal}, Testing: knowledge.TestingKnobs{SkipSimilar: true}})
	para, err := paraphraseStudy(ctx, pool, emb, svc, cfg.concurrency, progress)
	if err != nil {
		return err
	}
	rep, err := dupStudy(ctx, pool, emb, svc, plain, long, short, ds.Docs, cfg.concurrency, progress)
	if err != nil {
		return err
	}
	rep.Embedder, rep.Paraphrases = emb.Model(), para
	c := knowledge.CalibrationFor(emb.Model())
	if cal != nil {
		c = *cal
	}
	rep.Calibration = c
	if cfg.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return rep.Text(stdout)
}

// dupStudy loads the two orgs through svc and runs the probes. In the long
// org each probe is also stored (and forgotten) through plain, a service
// without the check, alternately, so the two store latencies compare on
// the same machine state.
func dupStudy(ctx context.Context, pool *pgxpool.Pool, emb embed.Embedder, svc, plain *knowledge.Service, long, short knowledge.Caller, docs []Doc, concurrency int, progress func(string, ...any)) (*DupReport, error) {
	loaded, held, realPair := holdOut(docs)
	d := &dupRun{ctx: ctx, pool: pool, emb: emb, svc: svc, plain: plain, concurrency: concurrency, progress: progress,
		rng: rand.New(rand.NewPCG(dupSeed, 1)), rep: &DupReport{Threshold: knowledge.SimilarThreshold, Checks: map[string]int{}}}
	for _, org := range []struct {
		name  string
		c     knowledge.Caller
		shape func(Doc) Doc
	}{{"long", long, func(d Doc) Doc { return d }}, {"short", short, shortDoc}} {
		if err := d.org(org.name, org.c, org.shape, loaded, held, realPair); err != nil {
			return nil, err
		}
	}
	rep := d.rep
	var right, listings, found, positives int
	for _, c := range rep.Categories {
		listings += c.Listings
		right += c.Listings - c.Wrong
		if c.Positive {
			found += c.Found
			positives += c.Probes
		}
	}
	rep.Precision = ratio(right, listings)
	rep.Recall = ratio(found, positives)
	with, without := Percentiles(d.storeTimes), Percentiles(d.plainTimes)
	rep.StoreP50Ms, rep.StoreP99Ms = with.P50, with.P99
	rep.PlainP50Ms, rep.PlainP99Ms = without.P50, without.P99
	return rep, nil
}

// holdOut splits the documents into those loaded and those held out as
// probes: the second of each same-title pair (realPair names its loaded
// twin), and every dupHoldout-th document without a twin.
func holdOut(docs []Doc) (loaded, held []Doc, realPair map[string]string) {
	byTitle := map[string][]int{}
	for i, d := range docs {
		k := strings.ToLower(strings.TrimSpace(d.Title))
		byTitle[k] = append(byTitle[k], i)
	}
	realPair = map[string]string{} // held-out doc id -> its loaded twin
	for i, d := range docs {
		twins := byTitle[strings.ToLower(strings.TrimSpace(d.Title))]
		switch {
		case len(twins) == 2 && twins[1] == i:
			held = append(held, d) // the second of a same-title pair
			realPair[d.ID] = docs[twins[0]].ID
		case len(twins) == 1 && i%dupHoldout == 0:
			held = append(held, d)
		default:
			loaded = append(loaded, d)
		}
	}
	return loaded, held, realPair
}

// dupRun is one run of the duplicate study: what it stores through, and
// what it has measured so far.
type dupRun struct {
	ctx         context.Context
	pool        *pgxpool.Pool
	emb         embed.Embedder
	svc, plain  *knowledge.Service
	concurrency int
	progress    func(string, ...any)
	rng         *rand.Rand

	rep                    *DupReport
	storeTimes, plainTimes []time.Duration
}

// org loads the documents into one org, in its shape, and runs its probes.
func (d *dupRun) org(name string, c knowledge.Caller, shape func(Doc) Doc, loaded, held []Doc, realPair map[string]string) error {
	in := make([]Doc, len(loaded))
	for i, doc := range loaded {
		in[i] = shape(doc)
	}
	d.progress("dups: storing %d documents into the %s org", len(in), name)
	docOf, _, err := load(d.ctx, d.svc, c, in, d.concurrency)
	if err != nil {
		return err
	}
	// The vectors the stores could not make within the budget (all of
	// them with an in-process embedder), as the worker would: the
	// check compares by meaning with ready entries only.
	if err := embedAll(d.ctx, d.pool, d.emb, c.OrgID, docOf, d.concurrency); err != nil {
		return err
	}
	if name == "long" {
		d.rep.LongDocs = len(docOf)
	} else {
		d.rep.ShortDocs = len(docOf)
	}
	if _, err := knowledge.NewMaintenance(d.svc, knowledge.MaintenanceConfig{}).IndexAll(d.ctx); err != nil {
		return err
	}
	entryOf := make(map[string]uuid.UUID, len(docOf))
	for id, doc := range docOf {
		entryOf[doc] = id
	}
	probes := dupProbes(d.rng, name, in, held, shape, entryOf, realPair)
	if name == "long" {
		d.rep.LongProbes = len(probes)
	}
	d.progress("dups: %d probes into the %s org", len(probes), name)
	cats := map[string]*DupCategory{}
	scores := map[string][]float64{}
	for _, p := range probes {
		cat := cats[p.kind]
		if cat == nil {
			cat = &DupCategory{Org: name, Kind: p.kind, Positive: p.positive}
			cats[p.kind] = cat
		}
		best, err := d.probe(name, c, p, cat)
		if err != nil {
			return err
		}
		if best >= 0 {
			scores[p.kind] = append(scores[p.kind], best)
		}
	}
	kinds := make([]string, 0, len(cats))
	for k := range cats {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		cats[k].setScores(scores[k])
		d.rep.Categories = append(d.rep.Categories, *cats[k])
	}
	return nil
}

// probe stores one probe (in the long org, also through plain, timing
// both), tallies what its store listed into cat, forgets it, and returns
// its best score (tally).
func (d *dupRun) probe(org string, c knowledge.Caller, p dupProbe, cat *DupCategory) (float64, error) {
	// The study measures the whole check, so each probe asks for it before
	// the answer (a default store leaves the meaning to the worker).
	p.in.IfSimilar = knowledge.IfSimilarReport
	start := time.Now()
	r, err := d.svc.Store(d.ctx, c, p.in)
	if err != nil {
		return 0, fmt.Errorf("probe %s: %w", p.kind, err)
	}
	if org == "long" {
		d.storeTimes = append(d.storeTimes, time.Since(start))
		start := time.Now()
		pr, err := d.plain.Store(d.ctx, c, p.in)
		if err != nil {
			return 0, err
		}
		d.plainTimes = append(d.plainTimes, time.Since(start))
		if _, err := d.plain.Forget(d.ctx, c, pr.ID, "duplicate study probe", false); err != nil {
			return 0, err
		}
	}
	d.rep.Checks[r.SimilarCheck]++
	best := tally(cat, r.Similar, p.source, org+"/"+p.kind, p.in.Title, &d.rep.WrongExamples)
	if _, err := d.svc.Forget(d.ctx, c, r.ID, "duplicate study probe", false); err != nil {
		return 0, err
	}
	return best, nil
}

// tally counts a probe's listings into cat: a positive probe that lists
// its source found it, every other listing is wrong (the first 20 wrong
// ones of a study are kept in examples, labelled). It returns the probe's
// best score: its source's for a positive, the highest listing's for a
// negative, -1 for none.
func tally(cat *DupCategory, similar []knowledge.Similar, source uuid.UUID, label, title string, examples *[]string) float64 {
	cat.Probes++
	cat.Listings += len(similar)
	best := -1.0
	for _, s := range similar {
		if cat.Positive && s.ID == source {
			cat.Found++
			best = s.Score
			continue
		}
		cat.Wrong++
		if len(*examples) < 20 {
			*examples = append(*examples, fmt.Sprintf("%s %.2f: %q listed %q", label, s.Score, cut(title, 60), cut(s.Title, 60)))
		}
		if !cat.Positive {
			best = max(best, s.Score)
		}
	}
	return best
}

// setScores sets the category's score percentiles from its probes' best
// scores.
func (c *DupCategory) setScores(s []float64) {
	slices.Sort(s)
	c.ScoreP10, c.ScoreP50, c.ScoreP90 = nearestRank(s, 0.1), nearestRank(s, 0.5), nearestRank(s, 0.9)
}

// dupProbes builds the probes of one org (docs: the org's loaded
// documents, in its shape; held: the held-out ones).
func dupProbes(rng *rand.Rand, org string, docs, held []Doc, shape func(Doc) Doc, entryOf map[string]uuid.UUID, realPair map[string]string) []dupProbe {
	var out []dupProbe
	pick := rng.Perm(len(docs))
	next := 0
	source := func(minSentences int) (Doc, bool) {
		for next < len(pick) {
			d := docs[pick[next]]
			next++
			if len(sentences(d.Text)) >= minSentences && len(strings.Fields(d.Text)) >= 8 {
				return d, true
			}
		}
		return Doc{}, false
	}
	add := func(kind string, d Doc, title, body string) {
		out = append(out, dupProbe{kind: kind, positive: true, source: entryOf[d.ID],
			in: storeInput(Doc{Title: title, Text: body})})
	}
	kinds := []string{"restated", "extended", "trimmed", "edited"}
	if org == "short" {
		kinds = []string{"reworded", "extended", "halved"}
	}
	perCat := min(dupPerCat, len(docs)/len(kinds))
	for _, kind := range kinds {
		for range perCat {
			minS := 3
			if org == "short" {
				minS = 1
			}
			d, ok := source(minS)
			if !ok {
				break
			}
			s := sentences(d.Text)
			// A sentence no entry of the org holds: from a held-out document.
			other := held[rng.IntN(len(held))]
			switch kind {
			case "restated":
				rng.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
				s = slices.Delete(s, 0, 1)
				add(kind, d, d.Title, strings.Join(s, " "))
			case "extended":
				extra := sentences(other.Text)
				if len(extra) < 2 {
					continue
				}
				add(kind, d, d.Title, d.Text+" "+extra[1])
			case "trimmed":
				add(kind, d, d.Title, strings.Join(s[:max(1, len(s)*6/10)], " "))
			case "edited":
				add(kind, d, cut(s[0], 120), dropWords(rng, d.Text, 0.1))
			case "reworded":
				w := strings.Fields(d.Title)
				rng.Shuffle(len(w), func(i, j int) { w[i], w[j] = w[j], w[i] })
				add(kind, d, strings.Join(w, " "), dropWords(rng, d.Text, 0.2))
			case "halved":
				w := strings.Fields(d.Text)
				add(kind, d, d.Title, strings.Join(w[:max(3, len(w)/2)], " "))
			}
		}
	}
	for _, h := range held {
		h = shape(h)
		if twin, ok := realPair[h.ID]; ok {
			if src, ok := entryOf[twin]; ok {
				out = append(out, dupProbe{kind: "real", positive: true, source: src, in: storeInput(h)})
			}
			continue
		}
		out = append(out, dupProbe{kind: "distinct", in: storeInput(h)})
	}
	return out
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// Text prints the study as a table.
func (r *DupReport) Text(w io.Writer) error {
	if r.Paraphrases != nil {
		if err := r.Paraphrases.Text(w); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "duplicate check: score (words: Jaccard; meaning: %s cosine, floor %.2f full %.2f, knowledge.MeaningScore) >= %.2f; long org %d entries, short org %d; checks %v\n",
		r.Embedder, r.Calibration.Floor, r.Calibration.Full, r.Threshold, r.LongDocs, r.ShortDocs, r.Checks)
	fmt.Fprintf(w, "%-6s %-9s %-8s %6s %6s %8s %6s  %s\n", "org", "kind", "label", "probes", "found", "listings", "wrong", "score p10/p50/p90")
	for _, c := range r.Categories {
		label := "distinct"
		found := "-"
		if c.Positive {
			label, found = "dup", fmt.Sprint(c.Found)
		}
		fmt.Fprintf(w, "%-6s %-9s %-8s %6d %6s %8d %6d  %.2f/%.2f/%.2f\n", c.Org, c.Kind, label, c.Probes, found, c.Listings, c.Wrong, c.ScoreP10, c.ScoreP50, c.ScoreP90)
	}
	for _, e := range r.WrongExamples {
		fmt.Fprintln(w, "  wrong:", e)
	}
	fmt.Fprintf(w, "precision %.3f (right listings / listings), recall %.3f (positives whose source was listed)\n", r.Precision, r.Recall)
	_, err := fmt.Fprintf(w, "Store (long org, %d probes): with the check p50 %.2f ms, p99 %.2f ms; without p50 %.2f ms, p99 %.2f ms\n",
		r.LongProbes, r.StoreP50Ms, r.StoreP99Ms, r.PlainP50Ms, r.PlainP99Ms)
	return err
}
