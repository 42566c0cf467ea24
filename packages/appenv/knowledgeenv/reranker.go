package knowledgeenv

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/agentfleet/orchestrator/packages/appenv"
	"github.com/agentfleet/orchestrator/packages/knowledge"
	"github.com/agentfleet/orchestrator/packages/knowledge/rerank"
)

// The reranker's variables (docs/knowledge.md, "Reranking"). None set: no
// reranker, and every search answers reranked false, not_configured.
const (
	EnvRerankPreset  = "RERANK_PRESET"   // cohere | jina | vllm | infinity | litellm | tei
	EnvRerankBaseURL = "RERANK_BASE_URL" // the server's root; default: the preset's
	EnvRerankModel   = "RERANK_MODEL"    // required
	EnvRerankAPIKey  = "RERANK_API_KEY"  // bearer token; required by cohere and jina
	EnvRerankTopN    = "RERANK_TOP_N"    // fused candidates it reads, default 30, 1 to 100
	EnvRerankBudget  = "RERANK_BUDGET"   // a search's time up to the reranker's answer, from its start; default 300ms
	// EnvRerankScoreFloor and EnvRerankScoreFull are an operator's
	// calibration of the model (knowledge.Config.RerankCalibration): both
	// or neither.
	EnvRerankScoreFloor = "RERANK_SCORE_FLOOR"
	EnvRerankScoreFull  = "RERANK_SCORE_FULL"
)

// Rerank is the reranker's configuration as the apps read it.
type Rerank struct {
	// Config is the provider's (zero: none).
	Config rerank.Config
	// TopN, Budget and Calibration go to knowledge.Config (0, nil: the
	// defaults).
	TopN        int
	Budget      time.Duration
	Calibration *knowledge.RerankCalibration
}

// Reranker reads the RERANK_* variables. Bad values are recorded in e, each
// naming its variable; New then succeeds once e.Err() is nil.
func Reranker(e *appenv.Env) Rerank {
	r := Rerank{
		Config: rerank.Config{
			Preset:  strings.ToLower(e.String(EnvRerankPreset, "")),
			BaseURL: e.String(EnvRerankBaseURL, ""),
			Model:   e.String(EnvRerankModel, ""),
			APIKey:  e.Raw(EnvRerankAPIKey),
		},
		TopN:   e.Int(EnvRerankTopN, 0, 1, knowledge.MaxRerankTopN),
		Budget: e.Duration(EnvRerankBudget, 0, time.Millisecond, time.Minute),
	}
	if !r.Config.Configured() && r.Config.APIKey != "" {
		e.Fail(EnvRerankAPIKey, "is set but no reranker is: set "+EnvRerankPreset+" or "+EnvRerankBaseURL+", and "+EnvRerankModel)
	}
	vars := map[string]string{"Preset": EnvRerankPreset, "BaseURL": EnvRerankBaseURL, "Model": EnvRerankModel, "APIKey": EnvRerankAPIKey}
	var fe *rerank.FieldError
	for _, err := range unjoin(r.Config.Validate()) {
		if errors.As(err, &fe) && vars[fe.Field] != "" {
			e.Fail(vars[fe.Field], fe.Rule)
		} else {
			e.Add(err)
		}
	}
	floor, full := e.String(EnvRerankScoreFloor, ""), e.String(EnvRerankScoreFull, "")
	if floor == "" && full == "" {
		return r
	}
	var c knowledge.RerankCalibration
	var err error
	if c.Floor, err = strconv.ParseFloat(floor, 64); err != nil {
		e.Fail(EnvRerankScoreFloor, "must be a number (the model's score of an unrelated passage), set together with "+EnvRerankScoreFull)
		return r
	}
	if c.Full, err = strconv.ParseFloat(full, 64); err != nil || c.Full <= c.Floor {
		e.Fail(EnvRerankScoreFull, "must be a number above "+EnvRerankScoreFloor+" (the model's score of a passage that answers the query)")
		return r
	}
	r.Calibration = &c
	return r
}

// New returns the reranker r configures (behind its breaker), or nil when
// none is.
func (r Rerank) New() (rerank.Reranker, error) {
	c, err := rerank.New(r.Config)
	if err != nil || c == nil {
		return nil, err // a nil *Client must not become a non-nil Reranker
	}
	return c, nil
}

// Apply sets r's tuning in c.
func (r Rerank) Apply(c *knowledge.Config) {
	c.RerankTopN, c.RerankBudget, c.RerankCalibration = r.TopN, r.Budget, r.Calibration
}
