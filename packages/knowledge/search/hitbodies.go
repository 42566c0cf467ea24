package search

import (
	"context"

	"github.com/google/uuid"
	"github.com/pgvector/pgvector-go"

	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/chunk"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/snippet"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
)

// hitBody is what an answer reads of a hit besides the ranking's row: its
// body (for the snippet), its fields and, for a section, its document, in
// one round trip.
type hitBody struct {
	body   string
	near   chunk.Span
	fields entryFields
	doc    *domain.DocumentRef
}

// entryFields are an entry's source, kind and metadata as answers give them.
type entryFields struct {
	Source   string
	Kind     string
	Metadata map[string]any
}

func fieldsOf(source *string, kind string, metadata []byte) entryFields {
	return entryFields{Source: domain.StrOf(source), Kind: kind, Metadata: domain.DecodeMetadata(metadata)}
}

// snippet is the hit's snippet: centred on its nearest chunk when the hit
// was found by the vector list through a later chunk, else snippet.Of's rule.
func (b hitBody) snippet(h rankedHit, query string) string {
	if h.VectorRank > 0 && b.near.Start >= 0 {
		return snippet.In(b.body, query, b.near.Start, b.near.End)
	}
	return snippet.Of(b.body, query)
}

// nearSettings keep the bodies' statement with a query vector
// (queries/chunks.sql, SearchBodiesNear) on the generic plan a connection
// makes once: each hit a probe of the primary key, a shape that pins the
// plan (TestSnippetLookUpReadsOnlyTheHitsChunks). Left to plan_cache_mode
// auto, PostgreSQL judged the generic plan costlier than the custom ones
// (it estimates the hits' array at 10 elements) and planned the statement
// on every search: 1.25 ms a search on a single node, 1.6 on a Citus
// worker, for a statement that runs in 0.1 (pg_stat_statements,
// docs/benchmarks.md, "Search latency"). SearchBodies (no query vector)
// keeps custom plans: its "k.id = ANY(@ids)" is no such shape.
var nearSettings = []string{"plan_cache_mode", "force_generic_plan"}

// bodies adds to have (made when nil) the bodies of the hits it does not
// hold yet and, with a query vector, the span of each one's nearest later
// chunk (queries/chunks.sql): the hits answered, or the candidates a
// reranker reads (rerank.go), whose bodies then serve the answer too.
func (s *Searcher) bodies(ctx context.Context, org uuid.UUID, hits []rankedHit, vec *pgvector.Vector, have map[uuid.UUID]hitBody) (map[uuid.UUID]hitBody, error) {
	out := have
	if out == nil {
		out = make(map[uuid.UUID]hitBody, len(hits))
	}
	var ids []uuid.UUID
	for _, h := range hits {
		if _, ok := out[h.ID]; !ok {
			ids = append(ids, h.ID)
		}
	}
	if len(ids) == 0 {
		return out, nil
	}
	var settings []string
	if vec != nil {
		settings = nearSettings
	}
	q, err := s.data.Reads(ctx, org, settings...)
	if err != nil {
		return nil, data.MapErr(err, "")
	}
	if vec == nil {
		rows, err := q.SearchBodies(ctx, sqlc.SearchBodiesParams{OrgID: org, Ids: ids})
		if err != nil {
			return nil, data.MapErr(err, "")
		}
		for _, r := range rows {
			out[r.ID] = hitBody{r.Body, chunk.Span{Start: -1, End: -1}, fieldsOf(r.Source, r.Kind, r.Metadata),
				hitDocument(r.DocID, r.DocTitle, r.DocHeadingPath, r.DocPosition, r.DocSource, r.DocEndedHow, r.DocFound)}
		}
		return out, nil
	}
	rows, err := q.SearchBodiesNear(ctx, sqlc.SearchBodiesNearParams{
		OrgID: org, Ids: ids, QueryVec: *vec, Model: s.opts.Embedder.Model(),
	})
	if err != nil {
		return nil, data.MapErr(err, "")
	}
	for _, r := range rows {
		out[r.ID] = hitBody{r.Body, chunk.Span{Start: int(r.StartChar), End: int(r.EndChar)}, fieldsOf(r.Source, r.Kind, r.Metadata),
			hitDocument(r.DocID, r.DocTitle, r.DocHeadingPath, r.DocPosition, r.DocSource, r.DocEndedHow, r.DocFound)}
	}
	return out, nil
}
