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
		out[r.ID] = documentRef(r.DocumentID, r.Title, r.HeadingPath, r.Position, r.Source, r.EndedHow)
	}
	return out, nil
}

// documentRef is the document of a section as an answer names it.
func documentRef(id uuid.UUID, title string, headingPath []string, position int32, source, endedHow *string) *domain.DocumentRef {
	ref := &domain.DocumentRef{ID: id, Title: title, HeadingPath: domain.NonNil(headingPath), Position: int(position)}
	if source != nil {
		ref.Source = *source
	}
	if endedHow != nil {
		ref.Ended = *endedHow
	}
	return ref
}

// hitDocument is the document of a hit that is a section, from the doc_*
// columns its body's read brings (SearchBodies, SearchBodiesNear), or nil.
func hitDocument(id *uuid.UUID, title *string, headingPath []string, position *int32, source, endedHow *string, found *bool) *domain.DocumentRef {
	if id == nil || title == nil || position == nil || found == nil || !*found {
		return nil
	}
	return documentRef(*id, *title, headingPath, *position, source, endedHow)
}
