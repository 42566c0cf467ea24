package knowledge

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"

	"github.com/agentfleet/orchestrator/db"
	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
	"github.com/agentfleet/orchestrator/packages/tenancy"
)

// Export and import of an org's knowledge as JSON Lines (docs/operators.md).
//
// The file is one JSON object per line, each with a "kind": a header, then
// the org's agents (authorship), its own relation types, the tasks its
// entries are linked to, its entries oldest first, the recorded
// supersession edges, the task links, the relations (open and closed).
// Ids are kept: every key of the schema leads with org_id, so the same ids
// can live in any org of any database, and an import into another org is a
// copy, not a clash. Nothing in the file names the org or the moment of the
// export, so exporting an import gives the same bytes (tested).
//
// Not exported: tokens (secrets; an org moved elsewhere gets new ones),
// quotas (an operator's setting of the target), embedding bookkeeping
// (generations, errors). Without --vectors an imported entry is pending and
// the worker embeds it with the target's model; with them, ready entries
// keep their vector and model.

// ExportFormat and ExportVersion name the file format. An import refuses a
// newer version: its meaning may have changed.
const (
	ExportFormat  = "agentfleet-knowledge"
	ExportVersion = 1
)

type exportHeader struct {
	Kind    string `json:"kind"` // "header"
	Format  string `json:"format"`
	Version int    `json:"version"`
	Vectors bool   `json:"vectors"`
}

type exportAgent struct {
	Kind      string    `json:"kind"` // "agent"
	ID        uuid.UUID `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
}

type exportTask struct {
	Kind      string    `json:"kind"` // "task"
	ID        uuid.UUID `json:"id"`
	Title     string    `json:"title"`
	CreatedAt time.Time `json:"createdAt"`
}

type exportVector struct {
	Model      string     `json:"model"`
	EmbeddedAt *time.Time `json:"embeddedAt,omitempty"`
	Vector     []float32  `json:"vector"`
}

type exportEntry struct {
	Kind          string     `json:"kind"` // "entry"
	ID            uuid.UUID  `json:"id"`
	Title         string     `json:"title"`
	Body          string     `json:"body"`
	Tags          []string   `json:"tags"`
	Confidence    int16      `json:"confidence"`
	Source        string     `json:"source"`
	AuthorAgentID *uuid.UUID `json:"authorAgentId"`
	ExpiresAt     *time.Time `json:"expiresAt"`
	// ClientToken is read from files of earlier exports and ignored: a
	// client token is a 60-second idempotence key, not knowledge, and
	// importing it could clash with another entry of the agent holding the
	// same token in the target org (the unique org, agent, token key), so
	// exports no longer write it and imports store none.
	ClientToken  *uuid.UUID    `json:"clientToken,omitempty"`
	SupersededBy *uuid.UUID    `json:"supersededBy"`
	HeadID       *uuid.UUID    `json:"headId"`
	SupersededAt *time.Time    `json:"supersededAt"`
	CreatedAt    time.Time     `json:"createdAt"`
	UpdatedAt    time.Time     `json:"updatedAt"`
	Embedding    *exportVector `json:"embedding,omitempty"`
}

type exportSupersession struct {
	Kind      string    `json:"kind"` // "supersession"
	OldID     uuid.UUID `json:"oldId"`
	NewID     uuid.UUID `json:"newId"`
	AgentID   uuid.UUID `json:"agentId"`
	CreatedAt time.Time `json:"createdAt"`
}

type exportLink struct {
	Kind          string     `json:"kind"` // "taskLink"
	TaskID        uuid.UUID  `json:"taskId"`
	EntryID       uuid.UUID  `json:"entryId"`
	LinkKind      string     `json:"linkKind"`
	AuthorAgentID *uuid.UUID `json:"authorAgentId"`
	CreatedAt     time.Time  `json:"createdAt"`
}

// exportRelationType is an org's own relation type (ctl relation-type add).
type exportRelationType struct {
	Kind    string `json:"kind"` // "relationType"
	Name    string `json:"name"`
	Inverse string `json:"inverse"`
}

// exportRelation is one relation, open or closed (its history), as stored:
// type is the catalogue name, fromId and toId in stored order.
type exportRelation struct {
	Kind            string     `json:"kind"` // "relation"
	ID              uuid.UUID  `json:"id"`
	FromID          uuid.UUID  `json:"fromId"`
	ToID            uuid.UUID  `json:"toId"`
	Type            string     `json:"type"`
	Note            *string    `json:"note,omitempty"`
	AuthorAgentID   *uuid.UUID `json:"authorAgentId"`
	ValidFrom       time.Time  `json:"validFrom"`
	ValidTo         *time.Time `json:"validTo"`
	ClosedByAgentID *uuid.UUID `json:"closedByAgentId,omitempty"`
}

// ExportOptions are the optional settings of Export.
type ExportOptions struct {
	Vectors  bool          // include the vectors of ready entries
	Progress func(n int64) // called with the entries written so far, every page
	PageSize int           // rows per read; default 1000
	_        struct{}      // keyed fields only
}

// ExportReport counts what an export wrote.
type ExportReport struct {
	Agents        int64 `json:"agents"`
	Tasks         int64 `json:"tasks"`
	Entries       int64 `json:"entries"`
	Vectors       int64 `json:"vectors"`
	Supersessions int64 `json:"supersessions"`
	TaskLinks     int64 `json:"taskLinks"`
	RelationTypes int64 `json:"relationTypes"`
	Relations     int64 `json:"relations"`
}

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
func (s *Service) Export(ctx context.Context, org uuid.UUID, w io.Writer, o ExportOptions) (*ExportReport, error) {
	ctx = db.WithOrg(ctx, org)
	if o.PageSize <= 0 {
		o.PageSize = 1000
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	rep := &ExportReport{}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		q := sqlc.New(tx)
		if err := enc.Encode(exportHeader{Kind: "header", Format: ExportFormat, Version: ExportVersion, Vectors: o.Vectors}); err != nil {
			return err
		}
		agents, err := tenancy.ListAgentsOn(ctx, tx, org)
		if err != nil {
			return err
		}
		for _, a := range agents {
			if err := enc.Encode(exportAgent{Kind: "agent", ID: a.ID, Name: a.Name, CreatedAt: utc(a.CreatedAt)}); err != nil {
				return err
			}
			rep.Agents++
		}
		types, err := q.ExportRelationTypes(ctx, org)
		if err != nil {
			return err
		}
		for _, t := range types {
			if err := enc.Encode(exportRelationType{Kind: "relationType", Name: t.Name, Inverse: t.Inverse}); err != nil {
				return err
			}
			rep.RelationTypes++
		}
		for after := uuid.Nil; ; {
			tasks, err := tenancy.ListTasksPage(ctx, tx, org, after, o.PageSize)
			if err != nil {
				return err
			}
			for _, t := range tasks {
				if err := enc.Encode(exportTask{Kind: "task", ID: t.ID, Title: t.Title, CreatedAt: utc(t.CreatedAt)}); err != nil {
					return err
				}
				rep.Tasks++
				after = t.ID
			}
			if len(tasks) < o.PageSize {
				break
			}
		}
		afterAt, afterID := time.Time{}, uuid.Nil
		for {
			rows, err := q.ExportEntries(ctx, sqlc.ExportEntriesParams{OrgID: org, AfterAt: afterAt, AfterID: afterID, MaxRows: int32(o.PageSize)})
			if err != nil {
				return err
			}
			vecs := map[uuid.UUID]sqlc.ExportEntryVectorsRow{}
			if o.Vectors && len(rows) > 0 {
				ids := make([]uuid.UUID, len(rows))
				for i, r := range rows {
					ids[i] = r.ID
				}
				vs, err := q.ExportEntryVectors(ctx, sqlc.ExportEntryVectorsParams{OrgID: org, Ids: ids})
				if err != nil {
					return err
				}
				for _, v := range vs {
					vecs[v.ID] = v
				}
			}
			for _, r := range rows {
				e := exportEntry{Kind: "entry", ID: r.ID, Title: r.Title, Body: r.Body, Tags: r.Tags, Confidence: r.Confidence,
					Source: r.Source, AuthorAgentID: r.CreatedByAgentID, ExpiresAt: utcp(r.ExpiresAt),
					SupersededBy: r.SupersededBy, HeadID: r.HeadID, SupersededAt: utcp(r.SupersededAt),
					CreatedAt: utc(r.CreatedAt), UpdatedAt: utc(r.UpdatedAt)}
				if e.Tags == nil {
					e.Tags = []string{}
				}
				if v, ok := vecs[r.ID]; ok && v.Embedding != nil && v.EmbeddingModel != nil {
					e.Embedding = &exportVector{Model: *v.EmbeddingModel, EmbeddedAt: utcp(v.EmbeddedAt), Vector: v.Embedding.Slice()}
					rep.Vectors++
				}
				if err := enc.Encode(e); err != nil {
					return err
				}
				rep.Entries++
				afterAt, afterID = r.CreatedAt, r.ID
			}
			if o.Progress != nil && len(rows) > 0 {
				o.Progress(rep.Entries)
			}
			if len(rows) < o.PageSize {
				break
			}
		}
		for after := uuid.Nil; ; {
			rows, err := q.ExportSupersessions(ctx, sqlc.ExportSupersessionsParams{OrgID: org, After: after, MaxRows: int32(o.PageSize)})
			if err != nil {
				return err
			}
			for _, r := range rows {
				if err := enc.Encode(exportSupersession{Kind: "supersession", OldID: r.OldID, NewID: r.NewID, AgentID: r.AgentID, CreatedAt: utc(r.CreatedAt)}); err != nil {
					return err
				}
				rep.Supersessions++
				after = r.OldID
			}
			if len(rows) < o.PageSize {
				break
			}
		}
		p := sqlc.ExportTaskLinksParams{OrgID: org, MaxRows: int32(o.PageSize)}
		for {
			rows, err := q.ExportTaskLinks(ctx, p)
			if err != nil {
				return err
			}
			for _, r := range rows {
				if err := enc.Encode(exportLink{Kind: "taskLink", TaskID: r.TaskID, EntryID: r.KnowledgeID, LinkKind: r.Kind,
					AuthorAgentID: r.CreatedByAgentID, CreatedAt: utc(r.CreatedAt)}); err != nil {
					return err
				}
				rep.TaskLinks++
				p.AfterTask, p.AfterEntry, p.AfterKind = r.TaskID, r.KnowledgeID, r.Kind
			}
			if len(rows) < o.PageSize {
				break
			}
		}
		for after := uuid.Nil; ; {
			rows, err := q.ExportRelations(ctx, sqlc.ExportRelationsParams{OrgID: org, After: after, MaxRows: int32(o.PageSize)})
			if err != nil {
				return err
			}
			for _, r := range rows {
				if err := enc.Encode(exportRelation{Kind: "relation", ID: r.ID, FromID: r.FromID, ToID: r.ToID, Type: r.Type, Note: r.Note,
					AuthorAgentID: r.CreatedByAgentID, ValidFrom: utc(r.ValidFrom), ValidTo: utcp(r.ValidTo), ClosedByAgentID: r.ClosedByAgentID}); err != nil {
					return err
				}
				rep.Relations++
				after = r.ID
			}
			if len(rows) < o.PageSize {
				break
			}
		}
		return bw.Flush()
	})
	if err != nil {
		return rep, mapErr(err, "")
	}
	return rep, nil
}

// ImportOptions are the optional settings of Import.
type ImportOptions struct {
	IgnoreQuota bool          // count the entries against the quota but do not stop at its limit
	Progress    func(n int64) // entries read so far, every batch
}

// ImportReport counts what an import added and what it skipped, and why.
type ImportReport struct {
	Agents        int64            `json:"agents"`
	Tasks         int64            `json:"tasks"`
	Entries       int64            `json:"entries"`
	Vectors       int64            `json:"vectors"`
	Chains        int64            `json:"chains"` // entries given their supersession columns
	Supersessions int64            `json:"supersessions"`
	TaskLinks     int64            `json:"taskLinks"`
	RelationTypes int64            `json:"relationTypes"`
	Relations     int64            `json:"relations"`
	Skipped       map[string]int64 `json:"skipped"` // reason -> count
}

func (r *ImportReport) skip(reason string) { r.Skipped[reason]++ }

// ErrNewerFormat is returned for a file of a format version this code does
// not know.
var ErrNewerFormat = errors.New("the file is of a newer format version")

// Import reads an export into org, in one transaction: all of it or
// nothing. It reads the file twice (open is called twice): first agents,
// tasks and entries (without their chains: a successor may come later in
// the file, and the schema's foreign keys are checked at once), then the
// chains, the recorded supersession edges and the task links. Memory stays
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
func (s *Service) Import(ctx context.Context, org uuid.UUID, open func() (io.ReadCloser, error), o ImportOptions) (*ImportReport, error) {
	ctx = db.WithOrg(ctx, org)
	rep := &ImportReport{Skipped: map[string]int64{}}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := s.importPass(ctx, tx, org, open, 1, o, rep); err != nil {
			return err
		}
		if err := tenancy.ConsumeQuotaN(ctx, tx, org, tenancy.ResourceKnowledgeStored, rep.Entries, o.IgnoreQuota); err != nil {
			if errors.Is(err, errs.ErrQuotaExceeded) {
				return &errs.Error{Code: errs.CodeQuotaExceeded, Field: "ignore-quota",
					Message: fmt.Sprintf("the org's knowledge_stored quota has no room for the %d new entries (nothing imported; raise the quota or pass --ignore-quota)", rep.Entries), Err: err}
			}
			return err
		}
		if err := s.importPass(ctx, tx, org, open, 2, o, rep); err != nil {
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
		if errors.As(err, &ke) || errors.Is(err, ErrNewerFormat) {
			return rep, err
		}
		return rep, mapErr(err, "")
	}
	// Each COPY batch appended its changes to the org counters (up to a
	// row per distinct tag); fold them now rather than at the worker's
	// next upkeep, so stats stays quick right after a large import. Stats
	// are exact either way, so a failure here is no failure of the import.
	_, _ = s.CompactCounts(ctx, 0)
	return rep, nil
}

const importBatch = 1000

// importPass reads the file once. Pass 1 writes agents, tasks, entries;
// pass 2 chains, edges and links.
func (s *Service) importPass(ctx context.Context, tx pgx.Tx, org uuid.UUID, open func() (io.ReadCloser, error), pass int, o ImportOptions, rep *ImportReport) error {
	f, err := open()
	if err != nil {
		return err
	}
	defer f.Close()
	q := sqlc.New(tx)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20) // an entry with a vector is ~10 KB; a body at most 32,000 characters
	var entries []exportEntry
	var chains []exportEntry
	var edges []exportSupersession
	var links []exportLink
	var rels []exportRelation
	var cat *catalogue // the org's, read when pass 2 meets its first relation
	var read int64
	flush := func() error {
		switch {
		case len(entries) > 0:
			if err := s.importEntries(ctx, tx, q, org, entries, rep); err != nil {
				return err
			}
			read += int64(len(entries))
			if o.Progress != nil {
				o.Progress(read)
			}
			entries = entries[:0]
		case len(chains) > 0:
			p := sqlc.ImportChainsParams{OrgID: org}
			for _, e := range chains {
				p.Ids = append(p.Ids, e.ID)
				p.SupersededBy = append(p.SupersededBy, *e.SupersededBy)
				p.HeadIds = append(p.HeadIds, *e.HeadID)
				p.SupersededAt = append(p.SupersededAt, *e.SupersededAt)
			}
			n, err := q.ImportChains(ctx, p)
			if err != nil {
				return err
			}
			rep.Chains += n
			if k := int64(len(chains)) - n; k > 0 {
				rep.Skipped["chain: entry already superseded in the org (its chain is kept)"] += k
			}
			chains = chains[:0]
		}
		if len(edges) > 0 {
			p := sqlc.ImportSupersessionsParams{OrgID: org}
			for _, e := range edges {
				p.OldIds, p.NewIds = append(p.OldIds, e.OldID), append(p.NewIds, e.NewID)
				p.AgentIds, p.CreatedAts = append(p.AgentIds, e.AgentID), append(p.CreatedAts, e.CreatedAt)
			}
			n, err := q.ImportSupersessions(ctx, p)
			if err != nil {
				return err
			}
			rep.Supersessions += n
			if k := int64(len(edges)) - n; k > 0 {
				rep.Skipped["supersession: already present"] += k
			}
			edges = edges[:0]
		}
		if len(links) > 0 {
			p := sqlc.ImportTaskLinksParams{OrgID: org}
			for _, l := range links {
				a := uuid.Nil
				if l.AuthorAgentID != nil {
					a = *l.AuthorAgentID
				}
				p.TaskIds, p.KnowledgeIds = append(p.TaskIds, l.TaskID), append(p.KnowledgeIds, l.EntryID)
				p.Kinds, p.AgentIds, p.CreatedAts = append(p.Kinds, l.LinkKind), append(p.AgentIds, a), append(p.CreatedAts, l.CreatedAt)
			}
			n, err := q.ImportTaskLinks(ctx, p)
			if err != nil {
				return err
			}
			rep.TaskLinks += n
			if k := int64(len(links)) - n; k > 0 {
				rep.Skipped["taskLink: already present"] += k
			}
			links = links[:0]
		}
		if len(rels) > 0 {
			p := sqlc.ImportRelationsParams{OrgID: org}
			for _, r := range rels {
				note, author, closer, to := "", uuid.Nil, uuid.Nil, ""
				if r.Note != nil {
					note = *r.Note
				}
				if r.AuthorAgentID != nil {
					author = *r.AuthorAgentID
				}
				if r.ClosedByAgentID != nil {
					closer = *r.ClosedByAgentID
				}
				if r.ValidTo != nil {
					to = r.ValidTo.UTC().Format(time.RFC3339Nano)
				}
				p.Ids, p.FromIds, p.ToIds, p.Types = append(p.Ids, r.ID), append(p.FromIds, r.FromID), append(p.ToIds, r.ToID), append(p.Types, r.Type)
				p.Notes, p.Authors, p.Closers = append(p.Notes, note), append(p.Authors, author), append(p.Closers, closer)
				p.ValidFroms, p.ValidTos = append(p.ValidFroms, r.ValidFrom), append(p.ValidTos, to)
			}
			n, err := q.ImportRelations(ctx, p)
			if err != nil {
				return err
			}
			rep.Relations += n
			if k := int64(len(rels)) - n; k > 0 {
				rep.Skipped["relation: already present"] += k
			}
			rels = rels[:0]
		}
		return nil
	}
	line := 0
	sawHeader := false
	for sc.Scan() {
		line++
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
			return errs.InvalidArgument("file", "line %d is not JSON: %v", line, err)
		}
		if !sawHeader {
			if k.Kind != "header" || k.Format != ExportFormat {
				return errs.InvalidArgument("file", "line 1 is not the header of a %s export", ExportFormat)
			}
			if k.Version > ExportVersion {
				return fmt.Errorf("%w: version %d, this program reads up to %d (use a newer ctl)", ErrNewerFormat, k.Version, ExportVersion)
			}
			sawHeader = true
			continue
		}
		bad := func(err error) error { return errs.InvalidArgument("file", "line %d (%s): %v", line, k.Kind, err) }
		switch k.Kind {
		case "agent":
			if pass != 1 {
				continue
			}
			var a exportAgent
			if err := json.Unmarshal(b, &a); err != nil {
				return bad(err)
			}
			ok, err := tenancy.ImportAgent(ctx, tx, tenancy.Agent{OrgID: org, ID: a.ID, Name: a.Name, CreatedAt: a.CreatedAt})
			if err != nil {
				return bad(err)
			}
			if ok {
				rep.Agents++
				continue
			}
			exists, err := tenancy.AgentExists(ctx, tx, org, a.ID)
			if err != nil {
				return err
			}
			if !exists {
				return errs.InvalidArgument("file", "line %d: agent %s's name %q is taken in this org by another agent; rename one of them first", line, a.ID, a.Name)
			}
			rep.skip("agent: already present")
		case "task":
			if pass != 1 {
				continue
			}
			var t exportTask
			if err := json.Unmarshal(b, &t); err != nil {
				return bad(err)
			}
			ok, err := tenancy.ImportTask(ctx, tx, tenancy.Task{OrgID: org, ID: t.ID, Title: t.Title, CreatedAt: t.CreatedAt})
			if err != nil {
				return bad(err)
			}
			if ok {
				rep.Tasks++
			} else {
				rep.skip("task: already present")
			}
		case "entry":
			var e exportEntry
			if err := json.Unmarshal(b, &e); err != nil {
				return bad(err)
			}
			if pass == 1 {
				entries = append(entries, e)
			} else if e.SupersededBy != nil {
				if e.HeadID == nil || e.SupersededAt == nil {
					return bad(errors.New("supersededBy without headId and supersededAt"))
				}
				chains = append(chains, e)
			}
		case "supersession":
			if pass != 2 {
				continue
			}
			var e exportSupersession
			if err := json.Unmarshal(b, &e); err != nil {
				return bad(err)
			}
			edges = append(edges, e)
		case "relationType":
			if pass != 1 {
				continue
			}
			var t exportRelationType
			if err := json.Unmarshal(b, &t); err != nil {
				return bad(err)
			}
			added, err := s.importRelationType(ctx, q, org, t)
			if err != nil {
				return bad(err)
			}
			if added {
				rep.RelationTypes++
			} else {
				rep.skip("relationType: already present")
			}
		case "relation":
			if pass != 2 {
				continue
			}
			var r exportRelation
			if err := json.Unmarshal(b, &r); err != nil {
				return bad(err)
			}
			if cat == nil {
				if cat, err = s.catalogueOf(ctx, q, org); err != nil {
					return err
				}
			}
			if ref, ok := cat.byName[r.Type]; !ok || ref.reversed || ref.t.ReadOnly {
				return bad(fmt.Errorf("relation type %q is not a type of this org's catalogue (the file's relationType lines add the org's own)", r.Type))
			}
			rels = append(rels, r)
		case "taskLink":
			if pass != 2 {
				continue
			}
			var l exportLink
			if err := json.Unmarshal(b, &l); err != nil {
				return bad(err)
			}
			links = append(links, l)
		default:
			if pass == 1 {
				rep.skip(fmt.Sprintf("unknown kind %q", k.Kind))
			}
		}
		if len(entries) >= importBatch || len(chains) >= importBatch || len(edges) >= importBatch || len(links) >= importBatch || len(rels) >= importBatch {
			if err := flush(); err != nil {
				return bad(err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read the file: %w", err)
	}
	if !sawHeader {
		return errs.InvalidArgument("file", "the file is empty")
	}
	for len(entries) > 0 || len(chains) > 0 || len(edges) > 0 || len(links) > 0 || len(rels) > 0 {
		if err := flush(); err != nil {
			return err
		}
	}
	return nil
}

// importRelationType adds an org's own relation type from a file, unless
// the org has it already (the same name and inverse); a name or inverse
// the org's catalogue uses otherwise refuses the file.
func (s *Service) importRelationType(ctx context.Context, q *sqlc.Queries, org uuid.UUID, t exportRelationType) (bool, error) {
	if err := checkTypeName("name", t.Name); err != nil {
		return false, err
	}
	if err := checkTypeName("inverse", t.Inverse); err != nil {
		return false, err
	}
	cat, err := s.catalogueOf(ctx, q, org)
	if err != nil {
		return false, err
	}
	if r, ok := cat.byName[t.Name]; ok && !r.reversed && r.t.Inverse == t.Inverse && !r.t.Builtin {
		return false, nil
	}
	for _, n := range []string{t.Name, t.Inverse} {
		if r, ok := cat.byName[n]; ok {
			return false, fmt.Errorf("relation type %s / %s clashes with the org's %s / %s", t.Name, t.Inverse, r.t.Name, r.t.Inverse)
		}
	}
	if _, err := q.InsertRelationType(ctx, sqlc.InsertRelationTypeParams{OrgID: org, Name: t.Name, Inverse: t.Inverse}); err != nil {
		return false, err
	}
	return true, nil
}

// importEntries copies the entries of a batch that the org does not have.
func (s *Service) importEntries(ctx context.Context, tx pgx.Tx, q *sqlc.Queries, org uuid.UUID, batch []exportEntry, rep *ImportReport) error {
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
			rep.skip("entry: already present")
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
		status := EmbeddingPending
		if e.Embedding != nil {
			v := pgvector.NewVector(e.Embedding.Vector)
			vec, model, at, status = &v, &e.Embedding.Model, e.Embedding.EmbeddedAt, EmbeddingReady
			if at == nil {
				now := time.Now()
				at = &now
			}
			rep.Vectors++
		}
		// The duplicate-check keys are written with the row, as Store
		// does: left to Upkeep's backfill, each would be a rewrite of the
		// row that every index takes again, the HNSW indexes included
		// (docs/benchmarks.md, "Upkeep after a bulk load").
		rows = append(rows, []any{org, e.ID, e.Title, e.Body, tags, e.Confidence, e.Source, e.AuthorAgentID, e.ExpiresAt,
			nil, e.CreatedAt, e.UpdatedAt, vec, status, model, at, // client_token: see exportEntry
			wordsOf(org, e.Title, e.Body).keys})
	}
	if len(rows) == 0 {
		return nil
	}
	// COPY through pgx rather than a sqlc :copyfrom query: sqlc adds
	// CopyFrom to the package's shared DBTX interface, which the search
	// pipeline's adapter (search.go) does not implement. The columns are
	// the table's own; the knowledge_queue_for_index trigger fires for
	// copied rows too, so the indexer takes them up.
	n, err := tx.CopyFrom(ctx, pgx.Identifier{"knowledge"}, importColumns, pgx.CopyFromRows(rows))
	rep.Entries += n
	return err
}

var importColumns = []string{"org_id", "id", "title", "body", "tags", "confidence", "source", "created_by_agent_id", "expires_at",
	"client_token", "created_at", "updated_at", "embedding", "embedding_status", "embedding_model", "embedded_at", "similar_keys"}
