package knowledge

import (
	"context"
	"encoding/json"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	domain "github.com/agentfleet/orchestrator/packages/knowledge"
)

// StatsURI is the org statistics resource: what `ctl stats --org` shows,
// for the caller's org (docs/mcp.md).
const StatsURI = "knowledge://stats"

// ResourceStats is the statistics resource's kind, as logged and counted.
const ResourceStats = "org_stats"

// statsTopTags is how many tags the resource lists (ctl stats' default).
const statsTopTags = 10

// StatsReader is what the statistics resource needs: the operators' calls
// (knowledge.Operations) have it; a Service that offers neither them nor
// it (a test double) serves no knowledge://stats.
type StatsReader interface {
	Stats(ctx context.Context, org uuid.UUID, topTags int) (*domain.OrgStats, error)
}

// withOperations is a Service that reaches the operators' calls.
type withOperations interface {
	Operations() *domain.Operations
}

func (t *toolset) registerStats(srv *mcp.Server) {
	sr, ok := t.svc.(StatsReader)
	if o, isOps := t.svc.(withOperations); !ok && isOps {
		sr, ok = o.Operations(), true
	}
	if !ok {
		return
	}
	srv.AddResource(&mcp.Resource{
		URI:         StatsURI,
		Name:        "org-stats",
		Title:       "Your organisation's knowledge statistics",
		Description: "What your organisation holds, as JSON: entries by state (heads, superseded, expired, forgotten), embeddings by status (pending, ready, failed) and ready entries by model, the age of the oldest pending embedding, the knowledge_stored quota (used, limit), the operators' rate limits, the 10 most used tags and entries per author agent (agentNames names them). Every count is exact. Needs knowledge:read.",
		MIMEType:    resourceMIMEType,
	}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		uri := req.Params.URI
		c, err := callerFrom(ctx)
		if err != nil {
			return nil, t.resourceError(ctx, req, uri, err)
		}
		st, err := sr.Stats(ctx, c.OrgID, statsTopTags)
		if err != nil {
			return nil, t.resourceError(ctx, req, uri, err)
		}
		b, err := json.Marshal(st)
		if err != nil {
			return nil, err
		}
		setOutcome(ctx, "ok", "")
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: resourceMIMEType, Text: string(b)}}}, nil
	})
}
