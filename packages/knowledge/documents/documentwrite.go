package documents

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/entries"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/simkeys"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
	"github.com/agentfleet/orchestrator/packages/knowledge/relations"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// currentSection is a section of the live document a store replaces.
type currentSection struct {
	id     uuid.UUID
	path   []string
	hash   []byte
	chars  int
	status string // its embedding status
}

// sectionDiff is what a replacement does: for each planned section, the
// section it keeps (kept) or supersedes (changed), uuid.Nil for a new one;
// and the current sections that are in it no more.
type sectionDiff struct {
	prev    []uuid.UUID
	kept    []bool
	status  []string // a kept section's embedding status
	retired []uuid.UUID
}

// diffSections matches the planned sections with the current ones: first
// the same entries (same hash, so same title, heading path, text, tags,
// kind, metadata), in order; then, among the rest, a section with the same
// heading path is changed (superseded by the new text); what is left is
// new or retired.
func diffSections(cur []currentSection, plan []plannedSection) sectionDiff {
	d := sectionDiff{prev: make([]uuid.UUID, len(plan)), kept: make([]bool, len(plan)), status: make([]string, len(plan))}
	used := make([]bool, len(cur))
	byHash := map[string][]int{}
	for i, c := range cur {
		byHash[string(c.hash)] = append(byHash[string(c.hash)], i)
	}
	for i, p := range plan {
		if q := byHash[string(p.hash)]; len(q) > 0 {
			byHash[string(p.hash)] = q[1:]
			used[q[0]] = true
			d.prev[i], d.kept[i], d.status[i] = cur[q[0]].id, true, cur[q[0]].status
		}
	}
	byPath := map[string][]int{}
	for i, c := range cur {
		if !used[i] {
			k := strings.Join(c.path, "\x1f")
			byPath[k] = append(byPath[k], i)
		}
	}
	for i, p := range plan {
		if d.kept[i] {
			continue
		}
		k := strings.Join(p.path, "\x1f")
		if q := byPath[k]; len(q) > 0 {
			byPath[k] = q[1:]
			used[q[0]] = true
			d.prev[i] = cur[q[0]].id
		}
	}
	for i, c := range cur {
		if !used[i] {
			d.retired = append(d.retired, c.id)
		}
	}
	return d
}

// docTx is one store of a document in its transaction.
type docTx struct {
	q    *sqlc.Queries
	c    domain.Caller
	a    *documentArgs
	p    *documentPlan
	res  *domain.DocumentResult
	jobs []domain.EmbeddingJob
	// notBefore is the clock once a store with a source holds its locks:
	// its new entries are made no earlier (InsertDocumentEntries).
	notBefore *time.Time
}

// writeDocument runs the store's transaction (again after a deadlock or
// serialisation failure) and returns the answer and the embedding jobs of
// the entries it wrote. entries.ErrTokenTaken: another call with the clientToken
// committed first.
func (s *Documents) writeDocument(ctx context.Context, c domain.Caller, a *documentArgs, p *documentPlan) (*domain.DocumentResult, []domain.EmbeddingJob, error) {
	var t *docTx
	err := s.data.RetryTx(ctx, func(tx pgx.Tx) error {
		t = &docTx{q: sqlc.New(tx), c: c, a: a, p: p, res: &domain.DocumentResult{
			Title: a.Title, Source: a.Source, Kind: a.Kind, Sections: make([]domain.SectionRef, 0, len(p.sections)), Retired: []uuid.UUID{}}}
		return t.run(ctx, tx)
	})
	if err != nil {
		return nil, nil, err
	}
	return t.res, t.jobs, nil
}

// run is the transaction. Lock order: the source's lock, the org's
// supersession lock (as Supersede, Forget and Purge take it before any
// entry), then, in one statement in id order, the live document's entry,
// its current sections' entries and the earlier versions of both
// (CurrentSections).
func (t *docTx) run(ctx context.Context, tx pgx.Tx) error {
	var live *sqlc.LiveDocumentBySourceRow
	var cur []currentSection
	if t.a.Source != "" {
		if testHookTxStarted != nil {
			testHookTxStarted(t.a.Source)
		}
		if err := t.q.LockDocumentSource(ctx, sqlc.LockDocumentSourceParams{OrgID: t.c.OrgID.String(), Source: t.a.Source}); err != nil {
			return err
		}
		if err := t.q.LockOrgSupersessions(ctx, t.c.OrgID.String()); err != nil {
			return err
		}
		at, err := t.q.LockedAt(ctx)
		if err != nil {
			return err
		}
		t.notBefore = &at
		row, err := t.q.LiveDocumentBySource(ctx, sqlc.LiveDocumentBySourceParams{OrgID: t.c.OrgID, Source: t.a.Source})
		switch {
		case err == nil:
			live = &row
			t.res.Replaced = true
			if cur, err = t.current(ctx, row.ID); err != nil {
				return err
			}
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
	}
	// A live document whose own entry is superseded (a database from
	// before Supersede refused that, or an import of one: sections follow
	// their document, docs/knowledge.md) is ended by this store, not kept
	// or superseded again: its entry has a successor already, and a second
	// one would be a second edge from it (knowledge_supersessions' key).
	superseded := live != nil && live.HeadID != nil
	if live != nil && !superseded && bytes.Equal(live.ContentHash, t.p.argsHash) {
		return t.unchanged(ctx, live.ID, cur)
	}
	d := diffSections(cur, t.p.sections)
	newDoc := live == nil || superseded || !bytes.Equal(live.EntryHash, t.p.entryHash)
	units := 0
	if newDoc {
		units++
	}
	for _, k := range d.kept {
		if !k {
			units++
		}
	}
	// The whole document's units, before anything is written: all or none.
	if err := tenancy.ConsumeQuotaN(ctx, tx, t.c.OrgID, tenancy.ResourceKnowledgeStored, int64(units), false); err != nil {
		return err
	}
	t.res.QuotaUnits = units
	docID := uuid.Nil
	if live != nil {
		docID = live.ID
	}
	if newDoc {
		docID = uuid.New()
	}
	if err := t.insertEntries(ctx, newDoc, docID, d); err != nil {
		return err
	}
	return t.link(ctx, live, newDoc, docID, d)
}

// testHookTxStarted, when set (only by internal tests, in init, before
// any store runs), is called by a store with a source once its
// transaction has started, before it takes any lock: a test holds a store
// there so that its transaction starts before others that take the
// source's lock first.
var testHookTxStarted func(source string)

// current reads (and locks) the live document's sections.
func (t *docTx) current(ctx context.Context, doc uuid.UUID) ([]currentSection, error) {
	rows, err := t.q.CurrentSections(ctx, sqlc.CurrentSectionsParams{OrgID: t.c.OrgID, DocumentID: doc})
	if err != nil {
		return nil, err
	}
	out := make([]currentSection, len(rows))
	for i, r := range rows {
		out[i] = currentSection{id: r.ID, path: r.HeadingPath, hash: r.ContentHash, chars: int(r.Chars), status: r.EmbeddingStatus}
	}
	return out, nil
}

// unchanged answers a store of the same arguments as the live document:
// nothing written but the clientToken.
func (t *docTx) unchanged(ctx context.Context, doc uuid.UUID, cur []currentSection) error {
	t.res.ID, t.res.Unchanged = doc, true
	for _, c := range cur {
		t.res.Sections = append(t.res.Sections, domain.SectionRef{ID: c.id, HeadingPath: domain.NonNil(c.path), Chars: c.chars, Status: SectionKept, EmbeddingStatus: c.status})
	}
	t.res.Kept = len(cur)
	return t.token(ctx, doc)
}

// token records the clientToken, if any, as having made doc.
func (t *docTx) token(ctx context.Context, doc uuid.UUID) error {
	if t.a.ClientToken == nil {
		return nil
	}
	n, err := t.q.InsertDocumentToken(ctx, sqlc.InsertDocumentTokenParams{
		OrgID: t.c.OrgID, AgentID: t.c.AgentID, ClientToken: *t.a.ClientToken, DocumentID: &doc, ArgsHash: t.p.argsHash})
	if err != nil {
		return err
	}
	if n == 0 {
		return entries.ErrTokenTaken
	}
	return nil
}

// insertEntries writes the new entries (the document's, when newDoc, and
// every section not kept) in one statement, and fills in the answer.
func (t *docTx) insertEntries(ctx context.Context, newDoc bool, docID uuid.UUID, d sectionDiff) error {
	var ids []uuid.UUID
	var titles, bodies, keys []string
	add := func(id uuid.UUID, title, body string) {
		ids, titles, bodies = append(ids, id), append(titles, title), append(bodies, body)
		keys = append(keys, simkeys.KeysLiteral(simkeys.WordsOf(t.c.OrgID, title, body).Keys))
	}
	if newDoc {
		add(docID, t.a.Title, t.p.toc)
	}
	t.res.ID = docID
	for i, s := range t.p.sections {
		ref := domain.SectionRef{ID: d.prev[i], HeadingPath: s.path, Chars: s.chars, Status: SectionKept, EmbeddingStatus: domain.EmbeddingPending}
		switch {
		case d.kept[i]:
			ref.EmbeddingStatus = d.status[i]
			t.res.Kept++
		case d.prev[i] != uuid.Nil:
			prev := d.prev[i]
			ref.ID, ref.Status, ref.Supersedes = uuid.New(), SectionChanged, &prev
			t.res.Changed++
		default:
			ref.ID, ref.Status = uuid.New(), SectionNew
			t.res.New++
		}
		if ref.Status != SectionKept {
			add(ref.ID, s.title, s.body)
		}
		t.res.Sections = append(t.res.Sections, ref)
	}
	if len(ids) == 0 {
		return nil
	}
	meta := []byte(t.a.Metadata)
	if meta == nil {
		meta = []byte("{}")
	}
	for start := 0; start < len(ids); {
		end := docWriteChunkEnd(bodies, start)
		rows, err := t.q.InsertDocumentEntries(ctx, sqlc.InsertDocumentEntriesParams{
			OrgID: t.c.OrgID, Tags: t.a.Tags, AgentID: t.c.AgentID, Source: domain.StrOrNil(t.a.Source), Kind: t.a.Kind, Metadata: meta,
			Ids: ids[start:end], Titles: titles[start:end], Bodies: bodies[start:end], Keys: keys[start:end], NotBefore: t.notBefore,
		})
		if err != nil {
			return err
		}
		for _, r := range rows {
			t.jobs = append(t.jobs, domain.EmbeddingJob{OrgID: t.c.OrgID, EntryID: r.ID, Generation: r.EmbeddingGeneration})
		}
		start = end
	}
	return nil
}

// docWriteChunkBytes bounds the bodies one insert of a document's entries
// carries. pgx encodes a statement's arguments into buffers of their own
// (the array, then the message), so a 10 MB document (uploads in parts)
// written in one statement held several copies of itself at once; in
// statements of about 1 MiB, a copy of a chunk (docs/benchmarks.md,
// "Documents in parts").
const docWriteChunkBytes = 1 << 20

// docWriteChunkEnd is the end of the chunk of bodies that starts at start:
// at least one body, then as many as fit in docWriteChunkBytes.
func docWriteChunkEnd(bodies []string, start int) int {
	end, n := start+1, len(bodies[start])
	for end < len(bodies) && n+len(bodies[end]) <= docWriteChunkBytes {
		n += len(bodies[end])
		end++
	}
	return end
}

// link writes the document's mark, supersedes changed sections (and the
// document's previous entry, when it is new), retires removed sections,
// puts every section at its position and makes the PART_OF relations.
func (t *docTx) link(ctx context.Context, live *sqlc.LiveDocumentBySourceRow, newDoc bool, docID uuid.UUID, d sectionDiff) error {
	org, agent := t.c.OrgID, t.c.AgentID
	if err := t.mark(ctx, live, newDoc, docID); err != nil {
		return err
	}
	var olds, news, changed, leaving, joining []uuid.UUID
	for i, ref := range t.res.Sections {
		switch ref.Status {
		case SectionChanged:
			olds, news = append(olds, *ref.Supersedes), append(news, ref.ID)
			changed = append(changed, *ref.Supersedes)
			joining = append(joining, ref.ID)
		case SectionNew:
			joining = append(joining, ref.ID)
		case SectionKept:
			if newDoc && live != nil {
				leaving, joining = append(leaving, d.prev[i]), append(joining, ref.ID)
			}
		}
	}
	if newDoc && live != nil {
		prev := live.ID
		if live.HeadID == nil {
			olds, news = append(olds, prev), append(news, docID)
		}
		t.res.PreviousID = &prev
	}
	if len(olds) > 0 {
		if err := t.supersede(ctx, olds, news); err != nil {
			return err
		}
	}
	for _, e := range []struct {
		how string
		ids []uuid.UUID
	}{{"changed", changed}, {"retired", d.retired}} {
		if len(e.ids) == 0 {
			continue
		}
		if err := t.q.EndSections(ctx, sqlc.EndSectionsParams{OrgID: org, Ids: e.ids, How: e.how}); err != nil {
			return err
		}
	}
	if len(d.retired) > 0 {
		if err := t.q.RetireSections(ctx, sqlc.RetireSectionsParams{OrgID: org, Ids: d.retired}); err != nil {
			return err
		}
		t.res.Retired = d.retired
	}
	if live != nil {
		leaving = append(append(leaving, changed...), d.retired...)
		if err := relations.UnlinkParts(ctx, t.q, org, agent, live.ID, leaving); err != nil {
			return err
		}
	}
	if err := t.putSections(ctx, docID); err != nil {
		return err
	}
	if err := relations.LinkParts(ctx, t.q, org, agent, docID, joining); err != nil {
		return err
	}
	return t.token(ctx, docID)
}

// supersede supersedes each of olds (a head, locked) by news[i], as
// Supersede does one entry: the old one, the earlier versions pointing at
// it, the recorded edge.
func (t *docTx) supersede(ctx context.Context, olds, news []uuid.UUID) error {
	org := t.c.OrgID
	if err := t.q.SupersedeSections(ctx, sqlc.SupersedeSectionsParams{OrgID: org, OldIds: olds, NewIds: news}); err != nil {
		return err
	}
	if err := t.q.MoveSectionHeads(ctx, sqlc.MoveSectionHeadsParams{OrgID: org, OldIds: olds, NewIds: news}); err != nil {
		return err
	}
	return t.q.InsertSectionSupersessions(ctx, sqlc.InsertSectionSupersessionsParams{OrgID: org, OldIds: olds, NewIds: news, AgentID: t.c.AgentID})
}

// mark writes the document's row: a new one (the previous entry's ends
// being its source's live version first: the unique key), or the kept
// entry's updated.
func (t *docTx) mark(ctx context.Context, live *sqlc.LiveDocumentBySourceRow, newDoc bool, docID uuid.UUID) error {
	org := t.c.OrgID
	n := int32(len(t.p.sections))
	if !newDoc {
		return t.q.UpdateDocument(ctx, sqlc.UpdateDocumentParams{OrgID: org, ID: docID, Format: t.a.Format,
			Sections: n, Chars: t.p.chars, ContentHash: t.p.argsHash})
	}
	if live != nil {
		if err := t.q.EndDocument(ctx, sqlc.EndDocumentParams{OrgID: org, ID: live.ID}); err != nil {
			return err
		}
	}
	var source *string
	if t.a.Source != "" {
		source = &t.a.Source
	}
	return t.q.InsertDocument(ctx, sqlc.InsertDocumentParams{OrgID: org, ID: docID, Source: source, Format: t.a.Format,
		Sections: n, Chars: t.p.chars, ContentHash: t.p.argsHash, EntryHash: t.p.entryHash})
}

// putSections writes every section's row at its position in docID.
func (t *docTx) putSections(ctx context.Context, docID uuid.UUID) error {
	n := len(t.res.Sections)
	p := sqlc.PutSectionsParams{OrgID: t.c.OrgID, DocumentID: docID,
		Ids: make([]uuid.UUID, n), Positions: make([]int32, n), Paths: make([]string, n), Hashes: make([][]byte, n)}
	for i, ref := range t.res.Sections {
		p.Ids[i], p.Positions[i] = ref.ID, int32(i)
		p.Paths[i], p.Hashes[i] = strings.Join(t.p.sections[i].path, "\x1f"), t.p.sections[i].hash
	}
	return t.q.PutSections(ctx, p)
}

// replayDocument answers a clientToken that already made a document: the
// document as it stands, if the arguments are the same (nil, nil: the
// token made nothing yet). A token whose document was forgotten is
// refused whatever the arguments, as store_knowledge refuses one
// (forgottenToken): the agent forgot what the store made, and a retry
// must not store it again under a new id.
func (s *Documents) replayDocument(ctx context.Context, c domain.Caller, a *documentArgs) (*domain.DocumentResult, error) {
	row, err := s.q.GetDocumentToken(ctx, sqlc.GetDocumentTokenParams{OrgID: c.OrgID, AgentID: c.AgentID, ClientToken: *a.ClientToken})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, data.MapErr(err, "")
	}
	if row.ForgottenAt != nil || row.DocumentID == nil {
		return nil, &errs.Error{Code: errs.CodeInvalidArgument, Field: "clientToken",
			Message: "made a document that has since been forgotten; it is not stored again under this clientToken (use a new clientToken to store it anew)"}
	}
	doc := *row.DocumentID
	if !bytes.Equal(row.ArgsHash, a.hash()) {
		return nil, &errs.Error{Code: errs.CodeInvalidArgument, Field: "clientToken",
			Message: "was already used with different arguments (it made document " + doc.String() + "); use a new clientToken for a new document"}
	}
	secs, err := s.q.DocumentSections(ctx, sqlc.DocumentSectionsParams{OrgID: c.OrgID, DocumentID: doc})
	if err != nil {
		return nil, data.MapErr(err, "")
	}
	res := &domain.DocumentResult{ID: doc, Title: a.Title, Source: a.Source, Kind: a.Kind, Replayed: true,
		Sections: make([]domain.SectionRef, len(secs)), Retired: []uuid.UUID{}, Kept: len(secs)}
	for i, r := range secs {
		res.Sections[i] = domain.SectionRef{ID: r.ID, HeadingPath: domain.NonNil(r.HeadingPath), Chars: int(r.Chars), Status: SectionKept, EmbeddingStatus: r.EmbeddingStatus}
	}
	return res, nil
}
