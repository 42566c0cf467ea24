package search

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
)

// DocumentOf reads the document parts of an entry: its document mark and
// sections if it is a document, its document if it is a section (both
// nil for a plain entry).
func (s *Searcher) DocumentOf(ctx context.Context, org, id uuid.UUID) (*domain.DocumentInfo, *domain.DocumentRef, error) {
	refs, err := s.sectionDocuments(ctx, org, []uuid.UUID{id})
	if err != nil {
		return nil, nil, err
	}
	d, err := s.q.GetDocument(ctx, sqlc.GetDocumentParams{OrgID: org, ID: id})
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, refs[id], nil
		}
		return nil, nil, data.MapErr(err, "")
	}
	rows, err := s.q.DocumentSections(ctx, sqlc.DocumentSectionsParams{OrgID: org, DocumentID: id})
	if err != nil {
		return nil, nil, data.MapErr(err, "")
	}
	info := &domain.DocumentInfo{Format: d.Format, Live: d.Live, Chars: d.Chars, Sections: make([]domain.DocumentSection, len(rows))}
	if d.Source != nil {
		info.Source = *d.Source
	}
	for i, r := range rows {
		info.Sections[i] = domain.DocumentSection{ID: r.ID, Title: r.Title, HeadingPath: domain.NonNil(r.HeadingPath), Chars: int(r.Chars), EmbeddingStatus: r.EmbeddingStatus}
	}
	return info, refs[id], nil
}

// sectionDocuments returns the documents of the sections among ids, by
// section id (one statement, by primary key).
func (s *Searcher) sectionDocuments(ctx context.Context, org uuid.UUID, ids []uuid.UUID) (map[uuid.UUID]*domain.DocumentRef, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := s.q.SectionsDocuments(ctx, sqlc.SectionsDocumentsParams{OrgID: org, Ids: ids})
	if err != nil {
		return nil, data.MapErr(err, "")
	}
	out := make(map[uuid.UUID]*domain.DocumentRef, len(rows))
	for _, r := range rows {
		ref := &domain.DocumentRef{ID: r.DocumentID, Title: r.Title, HeadingPath: domain.NonNil(r.HeadingPath), Position: int(r.Position)}
		if r.Source != nil {
			ref.Source = *r.Source
		}
		if r.EndedHow != nil {
			ref.Ended = *r.EndedHow
		}
		out[r.ID] = ref
	}
	return out, nil
}

// attachDocuments names, on each hit that is a section of a document,
// its document.
func (s *Searcher) attachDocuments(ctx context.Context, org uuid.UUID, hits []domain.Hit) error {
	ids := make([]uuid.UUID, len(hits))
	for i, h := range hits {
		ids[i] = h.ID
	}
	refs, err := s.sectionDocuments(ctx, org, ids)
	if err != nil {
		return err
	}
	for i := range hits {
		hits[i].Document = refs[hits[i].ID]
	}
	return nil
}
