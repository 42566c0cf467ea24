package knowledgeenv

import (
	"strings"
	"testing"
	"time"

	"github.com/agentfleet/orchestrator/packages/appenv"
	"github.com/agentfleet/orchestrator/packages/knowledge"
)

func TestReranker(t *testing.T) {
	t.Parallel()
	env := appenv.Vars
	e := appenv.New(env())
	r := Reranker(e)
	if rr, err := r.New(); rr != nil || err != nil || e.Err() != nil {
		t.Fatalf("nothing set: %v %v %v, want no reranker", rr, err, e.Err())
	}
	e = appenv.New(env(EnvRerankPreset, "TEI", EnvRerankModel, "BAAI/bge-reranker-v2-m3", EnvRerankTopN, "20",
		EnvRerankBudget, "150ms", EnvRerankScoreFloor, "0.05", EnvRerankScoreFull, "0.9"))
	r = Reranker(e)
	if err := e.Err(); err != nil {
		t.Fatal(err)
	}
	rr, err := r.New()
	if err != nil || rr == nil || rr.Model() != "BAAI/bge-reranker-v2-m3" {
		t.Fatalf("tei: %v %v", rr, err)
	}
	var c knowledge.Config
	r.Apply(&c)
	if c.RerankTopN != 20 || c.RerankBudget != 150*time.Millisecond || c.RerankCalibration == nil ||
		*c.RerankCalibration != (knowledge.RerankCalibration{Floor: 0.05, Full: 0.9}) {
		t.Fatalf("tuning %+v", c)
	}
	for name, c := range map[string]struct {
		env  func(string) string
		want string
	}{
		"unknown preset": {env(EnvRerankPreset, "bing", EnvRerankModel, "m"), EnvRerankPreset},
		"no model":       {env(EnvRerankPreset, "vllm"), EnvRerankModel},
		"url, no model":  {env(EnvRerankBaseURL, "http://127.0.0.1:8000"), EnvRerankModel},
		"model, no url":  {env(EnvRerankModel, "m"), EnvRerankBaseURL},
		"bad url":        {env(EnvRerankBaseURL, "reranker:8000", EnvRerankModel, "m"), EnvRerankBaseURL},
		"no key":         {env(EnvRerankPreset, "cohere", EnvRerankModel, "rerank-v3.5"), EnvRerankAPIKey},
		"key alone":      {env(EnvRerankAPIKey, "k"), EnvRerankAPIKey},
		"top n 0":        {env(EnvRerankPreset, "vllm", EnvRerankModel, "m", EnvRerankTopN, "0"), EnvRerankTopN},
		"top n 500":      {env(EnvRerankPreset, "vllm", EnvRerankModel, "m", EnvRerankTopN, "500"), EnvRerankTopN},
		"budget":         {env(EnvRerankPreset, "vllm", EnvRerankModel, "m", EnvRerankBudget, "300"), EnvRerankBudget},
		"floor alone":    {env(EnvRerankPreset, "vllm", EnvRerankModel, "m", EnvRerankScoreFloor, "0.1"), EnvRerankScoreFull},
		"full <= floor":  {env(EnvRerankPreset, "vllm", EnvRerankModel, "m", EnvRerankScoreFloor, "0.5", EnvRerankScoreFull, "0.4"), EnvRerankScoreFull},
		"floor text":     {env(EnvRerankPreset, "vllm", EnvRerankModel, "m", EnvRerankScoreFloor, "low", EnvRerankScoreFull, "0.4"), EnvRerankScoreFloor},
	} {
		e := appenv.New(c.env)
		Reranker(e)
		if err := e.Err(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error naming %s", name, err, c.want)
		}
	}
	// Every bad variable at once.
	e = appenv.New(env(EnvRerankPreset, "cohere", EnvRerankTopN, "x", EnvRerankBudget, "soon"))
	Reranker(e)
	for _, want := range []string{EnvRerankModel, EnvRerankAPIKey, EnvRerankTopN, EnvRerankBudget} {
		if err := e.Err(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want every bad variable named, %s among them", err, want)
		}
	}
}
