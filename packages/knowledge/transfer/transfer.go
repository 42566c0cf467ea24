package transfer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/simkeys"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/transferfmt"
	"github.com/agentfleet/orchestrator/packages/knowledge/maintenance"
	"github.com/agentfleet/orchestrator/packages/knowledge/relations"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

func utc(t time.Time) time.Time { return t.UTC() }

func utcp(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// Export writes org's knowledge to w. It reads one snapshot (a repeatable
// read, read-only transaction), page by page with keyset paging, so its
// memory does not grow with the org; w is buffered here.
func (tr *Transfer) Export(ctx context.Context, org uuid.UUID, w io.Writer, o domain.ExportOptions) (_ *domain.ExportReport, err error) {
	defer data.WrapOp(&err, "knowledge.Export")
	if o.PageSize <= 0 {
		o.PageSize = 1000
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	rep := &domain.ExportReport{}
	err = pgx.BeginTxFunc(ctx, tr.data.Scoped(), pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		x := &exporter{ctx: ctx, tx: tx, q: sqlc.New(tx), org: org, enc: enc, o: o, rep: rep}
		// The file's order (see above): what a line names comes before it.
		for _, section := range []func() error{x.header, x.agents, x.relationTypes, x.tasks, x.entries, x.documents, x.sections, x.supersessions, x.taskLinks, x.relations} {
			if err := section(); err != nil {
				return err
			}
		}
		return bw.Flush()
	})
	if err != nil {
		return rep, data.MapErr(err, "")
	}
	return rep, nil
}

// exporter writes the sections of one export, in its snapshot.
type exporter struct {
	ctx context.Context
	tx  pgx.Tx
	q   *sqlc.Queries
	org uuid.UUID
	enc *json.Encoder
	o   domain.ExportOptions
	rep *domain.ExportReport
}

// exportPages writes a keyset-paged list: page reads up to size rows after
// a cursor (the zero cursor: from the start), write encodes one row and
// returns the cursor after it, and a page shorter than size is the last.
// done, when set, is called after each page that had rows.
func exportPages[R, C any](size int, page func(after C) ([]R, error), write func(R) (C, error), done func()) error {
	var after C
	for {
		rows, err := page(after)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if after, err = write(r); err != nil {
				return err
			}
		}
		if done != nil && len(rows) > 0 {
			done()
		}
		if len(rows) < size {
			return nil
		}
	}
}

// encode writes one line and counts it in n.
func (x *exporter) encode(line any, n *int64) error {
	if err := x.enc.Encode(line); err != nil {
		return err
	}
	*n++
	return nil
}

func (x *exporter) header() error {
	return x.enc.Encode(transferfmt.Header{Kind: transferfmt.KindHeader, Format: transferfmt.Format, Version: transferfmt.Version, Vectors: x.o.Vectors})
}

func (x *exporter) agents() error {
	agents, err := tenancy.ListAgentsOn(x.ctx, x.tx, x.org)
	if err != nil {
		return err
	}
	for _, a := range agents {
		if err := x.encode(transferfmt.Agent{Kind: transferfmt.KindAgent, ID: a.ID, Name: a.Name, CreatedAt: utc(a.CreatedAt)}, &x.rep.Agents); err != nil {
			return err
		}
	}
	return nil
}

func (x *exporter) relationTypes() error {
	types, err := x.q.ExportRelationTypes(x.ctx, x.org)
	if err != nil {
		return err
	}
	for _, t := range types {
		if err := x.encode(transferfmt.RelationType{Kind: transferfmt.KindRelationType, Name: t.Name, Inverse: t.Inverse}, &x.rep.RelationTypes); err != nil {
			return err
		}
	}
	return nil
}

func (x *exporter) tasks() error {
	return exportPages(x.o.PageSize,
		func(after uuid.UUID) ([]tenancy.Task, error) {
			return tenancy.ListTasksPage(x.ctx, x.tx, x.org, after, x.o.PageSize)
		},
		func(t tenancy.Task) (uuid.UUID, error) {
			return t.ID, x.encode(transferfmt.Task{Kind: transferfmt.KindTask, ID: t.ID, Title: t.Title, CreatedAt: utc(t.CreatedAt)}, &x.rep.Tasks)
		}, nil)
}

// entryCursor is the entries' keyset: oldest first.
type entryCursor struct {
	at time.Time
	id uuid.UUID
}

// exportedEntry is an entry row with its vector, when the export takes
// vectors and the entry has one.
type exportedEntry struct {
	sqlc.ExportEntriesRow
	vec *sqlc.ExportEntryVectorsRow
}

func (x *exporter) entries() error {
	return exportPages(x.o.PageSize, x.entryPage, x.entry, func() {
		if x.o.Progress != nil {
			x.o.Progress(x.rep.Entries)
		}
	})
}

// entryPage reads a page of entries and, with Vectors, their vectors.
func (x *exporter) entryPage(after entryCursor) ([]exportedEntry, error) {
	rows, err := x.q.ExportEntries(x.ctx, sqlc.ExportEntriesParams{OrgID: x.org, AfterAt: after.at, AfterID: after.id, MaxRows: int32(x.o.PageSize)})
	if err != nil {
		return nil, err
	}
	page := make([]exportedEntry, len(rows))
	for i, r := range rows {
		page[i].ExportEntriesRow = r
	}
	if !x.o.Vectors || len(rows) == 0 {
		return page, nil
	}
	ids := make([]uuid.UUID, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	vs, err := x.q.ExportEntryVectors(x.ctx, sqlc.ExportEntryVectorsParams{OrgID: x.org, Ids: ids})
	if err != nil {
		return nil, err
	}
	vecs := make(map[uuid.UUID]*sqlc.ExportEntryVectorsRow, len(vs))
	for i := range vs {
		vecs[vs[i].ID] = &vs[i]
	}
	for i := range page {
		page[i].vec = vecs[page[i].ID]
	}
	return page, nil
}

func (x *exporter) entry(r exportedEntry) (entryCursor, error) {
	e := transferfmt.Entry{Kind: transferfmt.KindEntry, ID: r.ID, Title: r.Title, Body: r.Body, Tags: r.Tags, Confidence: r.Confidence,
		Origin: r.Origin, Source: domain.StrOf(r.Source), EntryKind: r.Kind, AuthorAgentID: r.CreatedByAgentID, ExpiresAt: utcp(r.ExpiresAt),
		SupersededBy: r.SupersededBy, HeadID: r.HeadID, SupersededAt: utcp(r.SupersededAt),
		CreatedAt: utc(r.CreatedAt), UpdatedAt: utc(r.UpdatedAt)}
	if e.Tags == nil {
		e.Tags = []string{}
	}
	if len(r.Metadata) > 0 && string(r.Metadata) != "{}" {
		e.Metadata = r.Metadata
	}
	if v := r.vec; v != nil && v.Embedding != nil && v.EmbeddingModel != nil {
		e.Embedding = &transferfmt.Vector{Model: *v.EmbeddingModel, EmbeddedAt: utcp(v.EmbeddedAt), Vector: v.Embedding.Slice()}
		x.rep.Vectors++
	}
	return entryCursor{at: r.CreatedAt, id: r.ID}, x.encode(e, &x.rep.Entries)
}

func (x *exporter) supersessions() error {
	return exportPages(x.o.PageSize,
		func(after uuid.UUID) ([]sqlc.ExportSupersessionsRow, error) {
			return x.q.ExportSupersessions(x.ctx, sqlc.ExportSupersessionsParams{OrgID: x.org, After: after, MaxRows: int32(x.o.PageSize)})
		},
		func(r sqlc.ExportSupersessionsRow) (uuid.UUID, error) {
			return r.OldID, x.encode(transferfmt.Supersession{Kind: transferfmt.KindSupersession, OldID: r.OldID, NewID: r.NewID, AgentID: r.AgentID, CreatedAt: utc(r.CreatedAt)}, &x.rep.Supersessions)
		}, nil)
}

func (x *exporter) taskLinks() error {
	return exportPages(x.o.PageSize,
		func(after sqlc.ExportTaskLinksParams) ([]sqlc.ExportTaskLinksRow, error) {
			after.OrgID, after.MaxRows = x.org, int32(x.o.PageSize)
			return x.q.ExportTaskLinks(x.ctx, after)
		},
		func(r sqlc.ExportTaskLinksRow) (sqlc.ExportTaskLinksParams, error) {
			return sqlc.ExportTaskLinksParams{AfterTask: r.TaskID, AfterEntry: r.KnowledgeID, AfterKind: r.Kind},
				x.encode(transferfmt.TaskLink{Kind: transferfmt.KindTaskLink, TaskID: r.TaskID, EntryID: r.KnowledgeID, LinkKind: r.Kind,
					AuthorAgentID: r.CreatedByAgentID, CreatedAt: utc(r.CreatedAt)}, &x.rep.TaskLinks)
		}, nil)
}

func (x *exporter) relations() error {
	return exportPages(x.o.PageSize,
		func(after uuid.UUID) ([]sqlc.ExportRelationsRow, error) {
			return x.q.ExportRelations(x.ctx, sqlc.ExportRelationsParams{OrgID: x.org, After: after, MaxRows: int32(x.o.PageSize)})
		},
		func(r sqlc.ExportRelationsRow) (uuid.UUID, error) {
			return r.ID, x.encode(transferfmt.Relation{Kind: transferfmt.KindRelation, ID: r.ID, FromID: r.FromID, ToID: r.ToID, Type: r.Type, Note: r.Note,
				AuthorAgentID: r.CreatedByAgentID, ValidFrom: utc(r.ValidFrom), ValidTo: utcp(r.ValidTo), ClosedByAgentID: r.ClosedByAgentID}, &x.rep.Relations)
		}, nil)
}

// skip counts a line an import skipped, by reason.
func skip(r *domain.ImportReport, reason string) { r.Skipped[reason]++ }

// Import reads an export into org, in one transaction: all of it or
// nothing. It reads the file twice (open is called twice): first agents,
// tasks and entries (without their chains: a successor may come later in
// the file, and the schema's foreign keys are checked at once), then the
// chains, the document marks and section rows, the recorded supersession
// edges, the task links and the relations. Memory stays
// constant: a batch of lines at a time.
//
// Idempotent: what is there already (an entry, agent or task with the
// same id in the org, the same edge or link) is skipped and counted as
// such, so a second run changes nothing. An entry superseded already in the
// org keeps its chain. After the writes the org's chains are checked
// (every cached head equals its successor's); a file that would break them
// is refused and nothing is written. Quota: the new entries are taken from
// the org's knowledge_stored quota at once, all or none, unless
// IgnoreQuota (then they are counted past the limit). New entries without a
// vector are pending: the worker's reconciler enqueues them within its
// grace period (WORKER_RECONCILE_GRACE); the lexical indexer picks them up
// on its next pass.
func (tr *Transfer) Import(ctx context.Context, org uuid.UUID, open func() (io.ReadCloser, error), o domain.ImportOptions) (_ *domain.ImportReport, err error) {
	defer data.WrapOp(&err, "knowledge.Import")
	rep := &domain.ImportReport{Skipped: map[string]int64{}}
	err = pgx.BeginFunc(ctx, tr.data.Scoped(), func(tx pgx.Tx) error {
		if err := tr.importPass(ctx, tx, org, open, 1, o, rep); err != nil {
			return err
		}
		if err := tenancy.ConsumeQuotaN(ctx, tx, org, tenancy.ResourceKnowledgeStored, rep.Entries, o.IgnoreQuota); err != nil {
			if errors.Is(err, errs.ErrQuotaExceeded) {
				return &errs.Error{Code: errs.CodeQuotaExceeded, Field: "ignoreQuota",
					Message: fmt.Sprintf("the org's knowledge_stored quota has no room for the %d new entries (nothing imported; raise the quota, or import ignoring it)", rep.Entries), Err: err}
			}
			return err
		}
		if err := tr.importPass(ctx, tx, org, open, 2, o, rep); err != nil {
			return err
		}
		bad, err := sqlc.New(tx).ImportCheckChains(ctx, org)
		if err != nil {
			return err
		}
		if bad > 0 {
			return errs.InvalidArgument("file", "the file's supersession chains contradict the org's (%d entries would name a wrong head); nothing imported", bad)
		}
		return nil
	})
	if err != nil {
		var ke *errs.Error
		if errors.As(err, &ke) || errors.Is(err, transferfmt.ErrNewerFormat) {
			return rep, err
		}
		return rep, data.MapErr(err, "")
	}
	// Each COPY batch appended its changes to the org counters (up to a
	// row per distinct tag); fold them now rather than at the worker's
	// next upkeep, so stats stays quick right after a large import. Stats
	// are exact either way, so a failure here is no failure of the import.
	_, _ = maintenance.CompactCounts(ctx, tr.data, 0)
	return rep, nil
}

const importBatch = 1000

// importPass reads the file once. Pass 1 writes agents, tasks, entries;
// pass 2 chains, edges and links.
func (tr *Transfer) importPass(ctx context.Context, tx pgx.Tx, org uuid.UUID, open func() (io.ReadCloser, error), pass int, o domain.ImportOptions, rep *domain.ImportReport) error {
	f, err := open()
	if err != nil {
		return err
	}
	defer f.Close()
	im := &importer{tr: tr, ctx: ctx, tx: tx, q: sqlc.New(tx), org: org, pass: pass, o: o, rep: rep}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20) // an entry with a vector is ~10 KB; a body at most 32,000 characters
	sawHeader := false
	for sc.Scan() {
		im.line++
		b := sc.Bytes()
		if len(b) == 0 {
			continue
		}
		var k struct {
			Kind    string `json:"kind"`
			Format  string `json:"format"`
			Version int    `json:"version"`
		}
		if err := json.Unmarshal(b, &k); err != nil {
			return errs.InvalidArgument("file", "line %d is not JSON: %v", im.line, err)
		}
		if !sawHeader {
			if err := transferfmt.CheckHeader(k.Kind, k.Format, k.Version); err != nil {
				return err
			}
			sawHeader, im.version = true, k.Version
			continue
		}
		im.kind = k.Kind
		if err := im.record(b); err != nil {
			return err
		}
		if im.full() {
			if err := im.flush(); err != nil {
				return im.bad(err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read the file: %w", err)
	}
	if !sawHeader {
		return errs.InvalidArgument("file", "the file is empty")
	}
	return im.flush()
}

// importer is one pass of an import: where it is in the file, and the
// records it holds back to write a batch at a time.
type importer struct {
	tr   *Transfer
	ctx  context.Context
	tx   pgx.Tx
	q    *sqlc.Queries
	org  uuid.UUID
	pass int
	o    domain.ImportOptions
	rep  *domain.ImportReport

	line    int    // of the record being read
	kind    string // its kind
	version int    // the file's format version (its header's)
	read    int64  // entries read so far (Progress)

	entries []transferfmt.Entry
	chains  []transferfmt.Entry // entries with a successor
	edges   []transferfmt.Supersession
	links   []transferfmt.TaskLink
	rels    []transferfmt.Relation
	docs    []transferfmt.Document
	secs    []transferfmt.Section
	cat     *relations.Catalogue // the org's, read when pass 2 meets its first relation
}

// recordDecoder reads the lines of one kind: pass is the pass that reads
// them (0: both), read decodes one and writes it or holds it back.
type recordDecoder struct {
	pass int
	read func(im *importer, line []byte) error
}

// importDecoders are the record kinds of the file (internal/transferfmt) and
// how an import reads each.
var importDecoders = map[string]recordDecoder{
	transferfmt.KindAgent:        {1, (*importer).agent},
	transferfmt.KindTask:         {1, (*importer).task},
	transferfmt.KindRelationType: {1, (*importer).relationType},
	transferfmt.KindEntry:        {0, (*importer).entry},
	transferfmt.KindSupersession: {2, holdBack(func(im *importer) *[]transferfmt.Supersession { return &im.edges })},
	transferfmt.KindTaskLink:     {2, holdBack(func(im *importer) *[]transferfmt.TaskLink { return &im.links })},
	transferfmt.KindRelation:     {2, (*importer).relation},
	transferfmt.KindDocument:     {2, holdBack(func(im *importer) *[]transferfmt.Document { return &im.docs })},
	transferfmt.KindSection:      {2, (*importer).section},
}

// record reads one line after the header. A kind this code does not know
// is skipped (counted once, in pass 1): a later format may add kinds.
func (im *importer) record(b []byte) error {
	d, ok := importDecoders[im.kind]
	if !ok {
		if im.pass == 1 {
			skip(im.rep, fmt.Sprintf("unknown kind %q", im.kind))
		}
		return nil
	}
	if d.pass != 0 && d.pass != im.pass {
		return nil
	}
	return d.read(im, b)
}

// bad refuses the file at the current line.
func (im *importer) bad(err error) error {
	return errs.InvalidArgument("file", "line %d (%s): %v", im.line, im.kind, err)
}

// decodeLine decodes one line into a record of its kind.
func decodeLine[T any](im *importer, b []byte) (T, error) {
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return v, im.bad(err)
	}
	return v, nil
}

func (im *importer) agent(b []byte) error {
	a, err := decodeLine[transferfmt.Agent](im, b)
	if err != nil {
		return err
	}
	ok, err := tenancy.ImportAgent(im.ctx, im.tx, tenancy.Agent{OrgID: im.org, ID: a.ID, Name: a.Name, CreatedAt: a.CreatedAt})
	if err != nil {
		return im.bad(err)
	}
	if ok {
		im.rep.Agents++
		return nil
	}
	exists, err := tenancy.AgentExists(im.ctx, im.tx, im.org, a.ID)
	if err != nil {
		return err
	}
	if !exists {
		return errs.InvalidArgument("file", "line %d: agent %s's name %q is taken in this org by another agent; rename one of them first", im.line, a.ID, a.Name)
	}
	skip(im.rep, "agent: already present")
	return nil
}

func (im *importer) task(b []byte) error {
	t, err := decodeLine[transferfmt.Task](im, b)
	if err != nil {
		return err
	}
	ok, err := tenancy.ImportTask(im.ctx, im.tx, tenancy.Task{OrgID: im.org, ID: t.ID, Title: t.Title, CreatedAt: t.CreatedAt})
	if err != nil {
		return im.bad(err)
	}
	im.count(ok, &im.rep.Tasks, "task: already present")
	return nil
}

func (im *importer) relationType(b []byte) error {
	t, err := decodeLine[transferfmt.RelationType](im, b)
	if err != nil {
		return err
	}
	added, err := im.tr.importRelationType(im.ctx, im.q, im.org, t)
	if err != nil {
		return im.bad(err)
	}
	im.count(added, &im.rep.RelationTypes, "relationType: already present")
	return nil
}

// count counts a record added in n, or skipped for reason.
func (im *importer) count(added bool, n *int64, reason string) {
	if added {
		*n++
	} else {
		skip(im.rep, reason)
	}
}

// entry holds back an entry (pass 1) or, when it has a successor, its
// chain (pass 2: the successor may come later in the file).
func (im *importer) entry(b []byte) error {
	e, err := decodeLine[transferfmt.Entry](im, b)
	if err != nil {
		return err
	}
	if err := im.entryFields(&e); err != nil {
		return im.bad(err)
	}
	if im.pass == 1 {
		im.entries = append(im.entries, e)
	} else if e.SupersededBy != nil {
		if e.HeadID == nil || e.SupersededAt == nil {
			return im.bad(errors.New("supersededBy without headId and supersededAt"))
		}
		im.chains = append(im.chains, e)
	}
	return nil
}

// entryFields reads an entry's origin, source, kind and metadata as the
// file's version wrote them (a version 1 "source" is the origin; the
// fields it lacks get their defaults) and checks them by Store's rules.
func (im *importer) entryFields(e *transferfmt.Entry) error {
	if im.version < transferfmt.VersionOrigin {
		e.Origin, e.Source = e.Source, ""
	}
	switch e.Origin {
	case domain.OriginAgent, domain.OriginOperator, domain.OriginImport:
	case "":
		e.Origin = domain.OriginImport
	default:
		return fmt.Errorf("origin %q is not one of %s, %s, %s", e.Origin, domain.OriginAgent, domain.OriginOperator, domain.OriginImport)
	}
	if e.EntryKind == "" {
		e.EntryKind = domain.DefaultKind
	}
	if err := domain.CheckKind("entryKind", e.EntryKind); err != nil {
		return err
	}
	if err := domain.CheckSource("source", e.Source); err != nil {
		return err
	}
	if len(e.Metadata) > 0 {
		dec := json.NewDecoder(bytes.NewReader(e.Metadata))
		dec.UseNumber()
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			return fmt.Errorf("metadata is not a JSON object: %w", err)
		}
		meta, err := domain.NormaliseMetadata("metadata", m)
		if err != nil {
			return err
		}
		e.Metadata = meta
	}
	return nil
}

// holdBack is the decoder of a kind whose records are only held back, in
// the batch that batch picks.
func holdBack[T any](batch func(im *importer) *[]T) func(*importer, []byte) error {
	return func(im *importer, b []byte) error {
		v, err := decodeLine[T](im, b)
		if err != nil {
			return err
		}
		p := batch(im)
		*p = append(*p, v)
		return nil
	}
}

// relation holds back a relation of a type of the org's catalogue (its
// own types came in pass 1).
func (im *importer) relation(b []byte) error {
	r, err := decodeLine[transferfmt.Relation](im, b)
	if err != nil {
		return err
	}
	if im.cat == nil {
		if im.cat, err = relations.CatalogueOf(im.ctx, im.q, im.org); err != nil {
			return err
		}
	}
	if ref, ok := im.cat.Lookup(r.Type); !ok || ref.Reversed || ref.Type.ReadOnly {
		return im.bad(fmt.Errorf("relation type %q is not a type of this org's catalogue (the file's relationType lines add the org's own)", r.Type))
	}
	im.rels = append(im.rels, r)
	return nil
}

// full tells whether a batch held back has reached importBatch.
func (im *importer) full() bool {
	return max(len(im.entries), len(im.chains), len(im.edges), len(im.links), len(im.rels), len(im.docs), len(im.secs)) >= importBatch
}

// flush writes the records held back: entries or chains, then document
// marks, section rows, edges, links and relations (what a record names is
// written before it).
func (im *importer) flush() error {
	for _, f := range []func() error{im.flushEntries, im.flushChains, im.flushDocuments, im.flushSections, im.flushEdges, im.flushLinks, im.flushRelations} {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

// flushBatch writes a batch held back with write, which returns how many
// records it added: those are counted in into, the others as skipped for
// reason (there already). The batch is emptied.
func flushBatch[T any](im *importer, batch *[]T, into *int64, reason string, write func([]T) (int64, error)) error {
	if len(*batch) == 0 {
		return nil
	}
	n, err := write(*batch)
	if err != nil {
		return err
	}
	*into += n
	if k := int64(len(*batch)) - n; k > 0 {
		im.rep.Skipped[reason] += k
	}
	*batch = (*batch)[:0]
	return nil
}

func (im *importer) flushEntries() error {
	if len(im.entries) == 0 {
		return nil
	}
	if err := im.tr.importEntries(im.ctx, im.tx, im.q, im.org, im.entries, im.rep); err != nil {
		return err
	}
	im.read += int64(len(im.entries))
	if im.o.Progress != nil {
		im.o.Progress(im.read)
	}
	im.entries = im.entries[:0]
	return nil
}

func (im *importer) flushChains() error {
	return flushBatch(im, &im.chains, &im.rep.Chains, "chain: entry already superseded in the org (its chain is kept)", func(chains []transferfmt.Entry) (int64, error) {
		p := sqlc.ImportChainsParams{OrgID: im.org}
		for _, e := range chains {
			p.Ids = append(p.Ids, e.ID)
			p.SupersededBy = append(p.SupersededBy, *e.SupersededBy)
			p.HeadIds = append(p.HeadIds, *e.HeadID)
			p.SupersededAt = append(p.SupersededAt, *e.SupersededAt)
		}
		return im.q.ImportChains(im.ctx, p)
	})
}

func (im *importer) flushEdges() error {
	return flushBatch(im, &im.edges, &im.rep.Supersessions, "supersession: already present", func(edges []transferfmt.Supersession) (int64, error) {
		p := sqlc.ImportSupersessionsParams{OrgID: im.org}
		for _, e := range edges {
			p.OldIds, p.NewIds = append(p.OldIds, e.OldID), append(p.NewIds, e.NewID)
			p.AgentIds, p.CreatedAts = append(p.AgentIds, e.AgentID), append(p.CreatedAts, e.CreatedAt)
		}
		return written(im.q.ImportSupersessions(im.ctx, p))
	})
}

func (im *importer) flushLinks() error {
	return flushBatch(im, &im.links, &im.rep.TaskLinks, "taskLink: already present", func(links []transferfmt.TaskLink) (int64, error) {
		p := sqlc.ImportTaskLinksParams{OrgID: im.org}
		for _, l := range links {
			p.TaskIds, p.KnowledgeIds = append(p.TaskIds, l.TaskID), append(p.KnowledgeIds, l.EntryID)
			p.Kinds, p.AgentIds, p.CreatedAts = append(p.Kinds, l.LinkKind), append(p.AgentIds, orNil(l.AuthorAgentID)), append(p.CreatedAts, l.CreatedAt)
		}
		return written(im.q.ImportTaskLinks(im.ctx, p))
	})
}

func (im *importer) flushRelations() error {
	return flushBatch(im, &im.rels, &im.rep.Relations, "relation: already present", func(rels []transferfmt.Relation) (int64, error) {
		p := sqlc.ImportRelationsParams{OrgID: im.org}
		for _, r := range rels {
			note, to := "", ""
			if r.Note != nil {
				note = *r.Note
			}
			if r.ValidTo != nil {
				to = r.ValidTo.UTC().Format(time.RFC3339Nano)
			}
			p.Ids, p.FromIds, p.ToIds, p.Types = append(p.Ids, r.ID), append(p.FromIds, r.FromID), append(p.ToIds, r.ToID), append(p.Types, r.Type)
			p.Notes, p.Authors, p.Closers = append(p.Notes, note), append(p.Authors, orNil(r.AuthorAgentID)), append(p.Closers, orNil(r.ClosedByAgentID))
			p.ValidFroms, p.ValidTos = append(p.ValidFroms, r.ValidFrom), append(p.ValidTos, to)
		}
		return written(im.q.ImportRelations(im.ctx, p))
	})
}

// written is how many rows an import statement wrote: the keys it
// returned (queries/transfer.sql, ImportSupersessions: why not a count).
func written(keys []uuid.UUID, err error) (int64, error) {
	return int64(len(keys)), err
}

// orNil is *id, or uuid.Nil for none (the import statements' arrays hold
// no NULL).
func orNil(id *uuid.UUID) uuid.UUID {
	if id == nil {
		return uuid.Nil
	}
	return *id
}

// importRelationType adds an org's own relation type from a file, unless
// the org has it already (the same name and inverse); a name or inverse
// the org's catalogue uses otherwise refuses the file.
func (tr *Transfer) importRelationType(ctx context.Context, q *sqlc.Queries, org uuid.UUID, t transferfmt.RelationType) (bool, error) {
	if err := domain.CheckTypeName("name", t.Name); err != nil {
		return false, err
	}
	if err := domain.CheckTypeName("inverse", t.Inverse); err != nil {
		return false, err
	}
	cat, err := relations.CatalogueOf(ctx, q, org)
	if err != nil {
		return false, err
	}
	if r, ok := cat.Lookup(t.Name); ok && !r.Reversed && r.Type.Inverse == t.Inverse && !r.Type.Builtin {
		return false, nil
	}
	for _, n := range []string{t.Name, t.Inverse} {
		if r, ok := cat.Lookup(n); ok {
			return false, fmt.Errorf("relation type %s / %s clashes with the org's %s / %s", t.Name, t.Inverse, r.Type.Name, r.Type.Inverse)
		}
	}
	if _, err := q.InsertRelationType(ctx, sqlc.InsertRelationTypeParams{OrgID: org, Name: t.Name, Inverse: t.Inverse}); err != nil {
		return false, err
	}
	return true, nil
}

// importEntries copies the entries of a batch that the org does not have.
func (tr *Transfer) importEntries(ctx context.Context, tx pgx.Tx, q *sqlc.Queries, org uuid.UUID, batch []transferfmt.Entry, rep *domain.ImportReport) error {
	ids := make([]uuid.UUID, len(batch))
	for i, e := range batch {
		ids[i] = e.ID
	}
	have, err := q.ExistingEntries(ctx, sqlc.ExistingEntriesParams{OrgID: org, Ids: ids})
	if err != nil {
		return err
	}
	present := make(map[uuid.UUID]bool, len(have))
	for _, id := range have {
		present[id] = true
	}
	// Forgetting erases for good (a leaked secret, personal data): an
	// import, from a file written before the forget, must not bring the
	// entry back. Refused whole rather than skipped, since the file's
	// chains and links name the entry too.
	if gone, err := q.ForgottenAmong(ctx, sqlc.ForgottenAmongParams{OrgID: org, Ids: ids}); err != nil {
		return err
	} else if len(gone) > 0 {
		return errs.InvalidArgument("file", "holds %d entries forgotten in this org (first: %s); forgotten entries stay erased: remove their lines, and the lines naming them, from the file", len(gone), gone[0])
	}
	rows := make([][]any, 0, len(batch))
	for _, e := range batch {
		if present[e.ID] {
			skip(rep, "entry: already present")
			continue
		}
		present[e.ID] = true // a line repeated in the file
		tags := e.Tags
		if tags == nil {
			tags = []string{}
		}
		var vec *pgvector.Vector
		var model *string
		var at *time.Time
		status := domain.EmbeddingPending
		if e.Embedding != nil {
			v := pgvector.NewVector(e.Embedding.Vector)
			vec, model, at, status = &v, &e.Embedding.Model, e.Embedding.EmbeddedAt, domain.EmbeddingReady
			if at == nil {
				now := tr.now()
				at = &now
			}
			rep.Vectors++
		}
		// The duplicate-check keys are written with the row, as Store
		// does: left to Upkeep's backfill, each would be a rewrite of the
		// row that every index takes again, the HNSW indexes included
		// (docs/benchmarks.md, "Upkeep after a bulk load").
		meta := []byte(e.Metadata)
		if len(meta) == 0 {
			meta = []byte("{}")
		}
		rows = append(rows, []any{org, e.ID, e.Title, e.Body, tags, e.Confidence, e.Origin, domain.StrOrNil(e.Source), e.EntryKind, meta,
			e.AuthorAgentID, e.ExpiresAt,
			nil, e.CreatedAt, e.UpdatedAt, vec, status, model, at, // client_token: see transferfmt.Entry
			simkeys.WordsOf(org, e.Title, e.Body).Keys})
	}
	if len(rows) == 0 {
		return nil
	}
	// COPY through pgx rather than a sqlc :copyfrom query: sqlc adds
	// CopyFrom to the package's shared DBTX interface, which the search
	// pipeline's adapter (package search) does not implement. The columns are
	// the table's own; the knowledge_queue_for_index trigger fires for
	// copied rows too, so the indexer takes them up.
	n, err := tx.CopyFrom(ctx, pgx.Identifier{"knowledge"}, importColumns, pgx.CopyFromRows(rows))
	rep.Entries += n
	return err
}

var importColumns = []string{"org_id", "id", "title", "body", "tags", "confidence", "origin", "source", "kind", "metadata",
	"created_by_agent_id", "expires_at",
	"client_token", "created_at", "updated_at", "embedding", "embedding_status", "embedding_model", "embedded_at", "similar_keys"}
