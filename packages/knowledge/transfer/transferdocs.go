package transfer

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/transferfmt"
)

// Export and import of documents (package documents): a document is entries
// (exported as entries) plus a mark on its entry and a row per section
// entry (knowledge_documents, knowledge_sections), written here as
// "document" and "section" lines after the entries; its sections' PART_OF
// relations are relations and travel as such. The rows keep what the
// org's history needs: replaced documents (live false), ended sections
// (changed or retired, when), positions, heading paths, and the hashes a
// later replacement compares, so a document imported elsewhere is replaced
// there as it would have been here (its unchanged sections keep their
// ids). Not exported: store_document's client tokens (idempotence keys,
// as for entries).

func (x *exporter) documents() error {
	return exportPages(x.o.PageSize,
		func(after uuid.UUID) ([]sqlc.ExportDocumentsRow, error) {
			return x.q.ExportDocuments(x.ctx, sqlc.ExportDocumentsParams{OrgID: x.org, After: after, MaxRows: int32(x.o.PageSize)})
		},
		func(r sqlc.ExportDocumentsRow) (uuid.UUID, error) {
			return r.ID, x.encode(transferfmt.Document{Kind: transferfmt.KindDocument, ID: r.ID, Source: r.Source, Format: r.Format,
				Sections: r.Sections, Chars: r.Chars, ContentHash: r.ContentHash, EntryHash: r.EntryHash, Live: r.Live,
				CreatedAt: utc(r.CreatedAt)}, &x.rep.Documents)
		}, nil)
}

func (x *exporter) sections() error {
	return exportPages(x.o.PageSize,
		func(after uuid.UUID) ([]sqlc.ExportSectionsRow, error) {
			return x.q.ExportSections(x.ctx, sqlc.ExportSectionsParams{OrgID: x.org, After: after, MaxRows: int32(x.o.PageSize)})
		},
		func(r sqlc.ExportSectionsRow) (uuid.UUID, error) {
			path := r.HeadingPath
			if path == nil {
				path = []string{}
			}
			return r.ID, x.encode(transferfmt.Section{Kind: transferfmt.KindSection, ID: r.ID, DocumentID: r.DocumentID,
				Position: r.Position, HeadingPath: path, ContentHash: r.ContentHash, EndedAt: utcp(r.EndedAt),
				EndedHow: r.EndedHow}, &x.rep.Sections)
		}, nil)
}

// section holds back a section row after checking what the statement
// cannot say clearly: a heading path travels joined by U+001F, so no part
// may hold a control character or be empty.
func (im *importer) section(b []byte) error {
	s, err := decodeLine[transferfmt.Section](im, b)
	if err != nil {
		return err
	}
	for _, h := range s.HeadingPath {
		if h == "" || strings.ContainsFunc(h, unicode.IsControl) {
			return im.bad(fmt.Errorf("section %s: heading %q is empty or holds a control character", s.ID, h))
		}
	}
	im.secs = append(im.secs, s)
	return nil
}

// flushDocuments writes the document marks held back. A live document
// whose source the org's own live document (another id) has refuses the
// file: an org has one live document per source, and which of the two
// replaces the other is the operator's choice (forget one, or remove its
// lines from the file).
func (im *importer) flushDocuments() error {
	if len(im.docs) == 0 {
		return nil
	}
	var live []string
	ids := make([]uuid.UUID, len(im.docs))
	for i, d := range im.docs {
		ids[i] = d.ID
		if d.Live && d.Source != nil {
			live = append(live, *d.Source)
		}
	}
	if len(live) > 0 {
		c, err := im.q.ImportLiveSourceClash(im.ctx, sqlc.ImportLiveSourceClashParams{OrgID: im.org, Sources: live, Ids: ids})
		switch {
		case err == nil:
			return errs.InvalidArgument("file", "a live document of source %q is in the file and, as %s, in this org; forget one of them, or remove the file's, first (nothing imported)", c.Source, c.ID)
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
	}
	return flushBatch(im, &im.docs, &im.rep.Documents, "document: already present", func(docs []transferfmt.Document) (int64, error) {
		p := sqlc.ImportDocumentsParams{OrgID: im.org}
		for _, d := range docs {
			source := ""
			if d.Source != nil {
				source = *d.Source
			}
			p.Ids, p.Sources, p.Formats = append(p.Ids, d.ID), append(p.Sources, source), append(p.Formats, d.Format)
			p.Sections, p.Chars, p.Lives = append(p.Sections, d.Sections), append(p.Chars, d.Chars), append(p.Lives, d.Live)
			p.ContentHashes, p.EntryHashes = append(p.ContentHashes, d.ContentHash), append(p.EntryHashes, d.EntryHash)
			p.CreatedAts = append(p.CreatedAts, d.CreatedAt)
		}
		n, err := written(im.q.ImportDocuments(im.ctx, p))
		return n, refusedRows(err, "document")
	})
}

// flushSections writes the section rows held back.
func (im *importer) flushSections() error {
	return flushBatch(im, &im.secs, &im.rep.Sections, "section: already present", func(secs []transferfmt.Section) (int64, error) {
		p := sqlc.ImportSectionsParams{OrgID: im.org}
		for _, s := range secs {
			at, how := "", ""
			if s.EndedAt != nil {
				at = s.EndedAt.UTC().Format(time.RFC3339Nano)
			}
			if s.EndedHow != nil {
				how = *s.EndedHow
			}
			p.Ids, p.DocumentIds, p.Positions = append(p.Ids, s.ID), append(p.DocumentIds, s.DocumentID), append(p.Positions, s.Position)
			p.Paths, p.ContentHashes = append(p.Paths, strings.Join(s.HeadingPath, "\x1f")), append(p.ContentHashes, s.ContentHash)
			p.EndedAts, p.EndedHows = append(p.EndedAts, at), append(p.EndedHows, how)
		}
		n, err := written(im.q.ImportSections(im.ctx, p))
		return n, refusedRows(err, "section")
	})
}

// refusedRows names, for the operator, what the schema refused in a batch
// of document or section rows: one naming an entry or document that is
// neither in the file nor in the org, or a value outside a CHECK.
func refusedRows(err error, what string) error {
	refused := func(r db.Refusal) *errs.Error {
		return errs.InvalidArgument("file", "a %s line has a value the schema refuses (%s); nothing imported", what, r.Constraint)
	}
	w := db.Wording{
		Missing: func(r db.Refusal) *errs.Error {
			return errs.InvalidArgument("file", "a %s line names an entry or document that is neither in the file nor in this org (%s); nothing imported", what, r.Constraint)
		},
		Check:   refused,
		NotNull: refused,
	}
	return w.Map(err, "")
}
