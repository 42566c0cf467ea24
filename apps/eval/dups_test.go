package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/agentfleet/orchestrator/packages/testenv"
)

// dupDataset writes 60 documents of four sentences drawn from a large
// made-up vocabulary (so distinct documents share few words), the last
// one a copy of the first under the same title (a "real" duplicate).
func dupDataset(t *testing.T) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	word := func() string { return fmt.Sprintf("w%04d", rng.IntN(5000)) }
	sentence := func() string {
		w := make([]string, 8)
		for i := range w {
			w[i] = word()
		}
		return strings.Join(w, " ") + "."
	}
	var corpus strings.Builder
	var first string
	for i := range 60 {
		title := fmt.Sprintf("%s %s %s", word(), word(), word())
		text := strings.Join([]string{sentence(), sentence(), sentence(), sentence()}, " ")
		line := fmt.Sprintf(`{"_id": "D-%d", "title": %q, "text": %q}`, i, title, text)
		if i == 0 {
			first = line
		}
		if i == 59 {
			line = strings.Replace(first, `"D-0"`, `"D-59"`, 1)
		}
		corpus.WriteString(line + "\n")
	}
	return writeBEIR(t, corpus.String(), `{"_id": "Q-1", "text": "w0001"}`+"\n", "query-id\tcorpus-id\tscore\nQ-1\tD-1\t1\n")
}

// The duplicate study end to end on the real database: every near-
// duplicate's source is listed, no distinct document lists anything, and
// the report says so.
func TestDupsOnTinyDataset(t *testing.T) {
	t.Parallel()
	dir := dupDataset(t)
	env := map[string]string{"TEST_DATABASE_URL": testenv.DatabaseURL()}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"--dups", "--json", dir}, func(k string) string { return env[k] }, &out); err != nil {
		t.Fatalf("run --dups: %v\n%s", err, out.String())
	}
	var rep DupReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	kinds := map[string]DupCategory{}
	for _, c := range rep.Categories {
		kinds[c.Org+"/"+c.Kind] = c
	}
	if c := kinds["long/real"]; c.Probes != 1 || c.Found != 1 {
		t.Errorf("the corpus's own duplicate: %+v", c)
	}
	if c := kinds["long/distinct"]; c.Probes == 0 || c.Listings != 0 {
		t.Errorf("distinct documents: %+v", c)
	}
	for _, k := range []string{"long/restated", "long/extended", "long/trimmed", "long/edited", "short/reworded", "short/halved"} {
		if c := kinds[k]; c.Probes == 0 || c.Found != c.Probes {
			t.Errorf("%s: %+v", k, c)
		}
	}
	if rep.Recall != 1 || rep.Precision != 1 || rep.StoreP50Ms <= 0 || rep.PlainP50Ms <= 0 {
		t.Errorf("report: %+v", rep)
	}
}
