package search

import (
	"context"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
	"github.com/agentfleet/orchestrator/packages/knowledge/relations"
)

// hopTypes maps relationTypes (names as read from a hit) to the stored
// types to follow in each direction; nil: every type.
func hopTypes(cat *relations.Catalogue, names []string) (out, in []string, err error) {
	if names == nil {
		return nil, nil, nil
	}
	out, in = []string{}, []string{}
	for i, n := range names {
		r, err := cat.Resolve(fmt.Sprintf("relationTypes[%d]", i), n, false)
		if err != nil {
			return nil, nil, err
		}
		switch {
		case r.Type.ReadOnly:
			return nil, nil, errs.InvalidArgument(fmt.Sprintf("relationTypes[%d]", i),
				"%s is not followed by hops: a related entry that was superseded is answered as the head of its chain, and a superseded hit names its head (headId)", n)
		case r.Type.Symmetric:
			out, in = append(out, r.Type.Name), append(in, r.Type.Name)
		case r.Reversed:
			in = append(in, r.Type.Name)
		default:
			out = append(out, r.Type.Name)
		}
	}
	return out, in, nil
}

// expand adds to the direct hits the entries reachable from them over
// open (or, with asOf, then valid) relations, up to a.Hops relations away:
// each at most once, never a direct hit, within the search's filters, a
// superseded one as its chain's head (unless includeSuperseded), scored
// HopDecay times the entry it was reached from, at most a.Limit in all
// (the best-scored frontier entries' relations first; among one entry's,
// the newest). It returns the added hits, best first.
func (s *Searcher) expand(ctx context.Context, c domain.Caller, a *domain.SearchArgs, hits []rankedHit) ([]rankedHit, error) {
	if a.Hops == 0 || len(hits) == 0 {
		return nil, nil
	}
	cat, err := relations.CatalogueOf(ctx, s.q, c.OrgID)
	if err != nil {
		return nil, err
	}
	outTypes, inTypes, err := hopTypes(cat, a.RelationTypes)
	if err != nil {
		return nil, err
	}
	seen := make(map[uuid.UUID]bool, len(hits))
	score := make(map[uuid.UUID]float64, len(hits))
	frontier := make([]uuid.UUID, 0, len(hits))
	for _, h := range hits {
		seen[h.ID] = true
		score[h.ID] = h.Score
		frontier = append(frontier, h.ID)
	}
	var added []rankedHit
	for hop := 1; hop <= a.Hops && len(frontier) > 0 && len(added) < a.Limit; hop++ {
		rows, err := s.q.SearchHop(ctx, sqlc.SearchHopParams{
			OrgID: c.OrgID, Ids: frontier, OutTypes: outTypes, InTypes: inTypes, PerEntry: domain.HopEdgesPerEntry,
			AsOf: a.AsOf, Tags: domain.NonNil(a.Tags), IncludeSuperseded: a.IncludeSuperseded, IncludeExpired: a.IncludeExpired,
			Kind: a.Filters.Kind, Source: a.Filters.Source, SourcePrefix: a.Filters.SourcePrefix, Metadata: a.Filters.Metadata,
			Within: a.Within.HopIDs(),
		})
		if err != nil {
			return nil, data.MapErr(err, "")
		}
		// The best-scored sources first; the statement gives each source's
		// relations newest first, and a stable sort keeps that order.
		slices.SortStableFunc(rows, func(x, y sqlc.SearchHopRow) int {
			switch sx, sy := score[x.Src], score[y.Src]; {
			case sx > sy:
				return -1
			case sx < sy:
				return 1
			}
			return 0
		})
		frontier = frontier[:0:0]
		for i := range rows {
			r := &rows[i]
			if seen[r.ID] {
				continue
			}
			if len(added) >= a.Limit {
				break
			}
			seen[r.ID] = true
			sc := score[r.Src] * domain.HopDecay
			score[r.ID] = sc
			frontier = append(frontier, r.ID)
			typ := r.Type
			switch {
			case cat.Symmetric(r.Type):
			case r.Dir == domain.DirIn:
				typ = cat.InverseOf(r.Type)
			}
			added = append(added, rankedHit{
				fusedHit: fusedHit{Candidate: Candidate{ID: r.ID}, Score: sc},
				row: &candidateRow{Candidate: Candidate{ID: r.ID}, Title: r.Title, Tags: r.Tags, Confidence: r.Confidence,
					CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt, HeadID: r.HeadID, EmbeddingStatus: r.EmbeddingStatus},
				via: &domain.Via{FromID: r.Src, Type: typ, Hops: hop},
			})
		}
	}
	return added, nil
}

// mergeHits puts the added hits among the direct ones by score (a direct
// hit first on a tie): each added hit lands below the entry it came from.
func mergeHits(direct, added []rankedHit) []rankedHit {
	if len(added) == 0 {
		return direct
	}
	out := make([]rankedHit, 0, len(direct)+len(added))
	out = append(out, direct...)
	out = append(out, added...)
	slices.SortStableFunc(out, func(x, y rankedHit) int {
		switch {
		case x.Score > y.Score:
			return -1
		case x.Score < y.Score:
			return 1
		}
		return 0
	})
	return out
}
