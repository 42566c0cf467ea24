package knowledge

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
)

// DocumentRef names the document a section belongs to, as a search hit
// and a read of the section show it.
type DocumentRef struct {
	ID          uuid.UUID `json:"id"`
	Title       string    `json:"title"`
	Source      string    `json:"source,omitempty"`
	HeadingPath []string  `json:"headingPath"`
	// Position is the section's place in the document (0-based).
	Position int `json:"position"`
	// Ended says how a section left its document when a replacement
	// changed it ("changed": superseded by its new version) or removed it
	// ("retired": expired); empty while it is part of it.
	Ended string `json:"ended,omitempty"`
}

// DocumentInfo is what get_knowledge shows of a document entry: where it
// came from and its sections in order.
type DocumentInfo struct {
	Source string `json:"source,omitempty"`
	Format string `json:"format"`
	// Live: the current version of its source (false once a replacement
	// superseded this document entry).
	Live     bool              `json:"live"`
	Chars    int64             `json:"chars"`
	Sections []DocumentSection `json:"sections"`
}

// DocumentSection is one section in a document's listing.
type DocumentSection struct {
	ID              uuid.UUID `json:"id"`
	Title           string    `json:"title"`
	HeadingPath     []string  `json:"headingPath"`
	Chars           int       `json:"chars"`
	EmbeddingStatus string    `json:"embeddingStatus"`
}

// documentOf reads the document parts of an entry: its document mark and
// sections if it is a document, its document if it is a section (both
// nil for a plain entry).
func (s *Service) documentOf(ctx context.Context, org, id uuid.UUID) (*DocumentInfo, *DocumentRef, error) {
	refs, err := s.sectionDocuments(ctx, org, []uuid.UUID{id})
	if err != nil {
		return nil, nil, err
	}
	d, err := s.q.GetDocument(ctx, sqlc.GetDocumentParams{OrgID: org, ID: id})
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, refs[id], nil
		}
		return nil, nil, mapErr(err, "")
	}
	rows, err := s.q.DocumentSections(ctx, sqlc.DocumentSectionsParams{OrgID: org, DocumentID: id})
	if err != nil {
		return nil, nil, mapErr(err, "")
	}
	info := &DocumentInfo{Format: d.Format, Live: d.Live, Chars: d.Chars, Sections: make([]DocumentSection, len(rows))}
	if d.Source != nil {
		info.Source = *d.Source
	}
	for i, r := range rows {
		info.Sections[i] = DocumentSection{ID: r.ID, Title: r.Title, HeadingPath: nonNil(r.HeadingPath), Chars: int(r.Chars), EmbeddingStatus: r.EmbeddingStatus}
	}
	return info, refs[id], nil
}

// sectionDocuments returns the documents of the sections among ids, by
// section id (one statement, by primary key).
func (s *Service) sectionDocuments(ctx context.Context, org uuid.UUID, ids []uuid.UUID) (map[uuid.UUID]*DocumentRef, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := s.q.SectionsDocuments(ctx, sqlc.SectionsDocumentsParams{OrgID: org, Ids: ids})
	if err != nil {
		return nil, mapErr(err, "")
	}
	out := make(map[uuid.UUID]*DocumentRef, len(rows))
	for _, r := range rows {
		ref := &DocumentRef{ID: r.DocumentID, Title: r.Title, HeadingPath: nonNil(r.HeadingPath), Position: int(r.Position)}
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
func (s *Service) attachDocuments(ctx context.Context, org uuid.UUID, hits []Hit) error {
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
