package relations

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/sqlc"
)

// Relations records and reads the typed relations between entries and the
// catalogue of their types. Every method's ctx carries the caller's org
// (data.AsOrg: the facade puts it there). It is safe for concurrent use.
type Relations struct {
	data *data.DB
	now  func() time.Time
}

// Options are what a Relations is made with; every zero value is the
// documented default.
type Options struct {
	// Now is the clock of as-of reads and of the entries' states the
	// listings name. Default: time.Now.
	Now func() time.Time
}

// New returns the relations of d's database.
func New(d *data.DB, o Options) *Relations {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Relations{data: d, now: o.Now}
}

// BuiltinRelationTypes is the catalogue every org has.
var BuiltinRelationTypes = []domain.RelationType{
	{Name: "RELATES_TO", Inverse: "RELATES_TO", Symmetric: true, Builtin: true},
	{Name: "DEPENDS_ON", Inverse: "REQUIRED_BY", Builtin: true},
	{Name: "CONTRADICTS", Inverse: "CONTRADICTS", Symmetric: true, Builtin: true},
	{Name: "DERIVED_FROM", Inverse: "SOURCE_OF", Builtin: true},
	{Name: "PART_OF", Inverse: "HAS_PART", Builtin: true},
	{Name: "FIXES", Inverse: "FIXED_BY", Builtin: true},
	{Name: "CAUSED_BY", Inverse: "CAUSES", Builtin: true},
	{Name: "EXAMPLE_OF", Inverse: "HAS_EXAMPLE", Builtin: true},
	{Name: "DUPLICATES", Inverse: "DUPLICATES", Symmetric: true, Builtin: true},
	{Name: "MOTIVATED_BY", Inverse: "MOTIVATES", Builtin: true},
	{Name: domain.RelSupersedes, Inverse: domain.RelSupersededBy, ReadOnly: true, Builtin: true},
}

// Catalogue resolves a type name (a type's name or its inverse) for one org.
type Catalogue struct {
	types  []domain.RelationType
	byName map[string]TypeRef
	sym    []string // symmetric names
}

// TypeRef is what a name means: the type, and whether it is the type's
// inverse name (the relation then runs the other way).
type TypeRef struct {
	Type     domain.RelationType
	Reversed bool
}

// newCatalogue is the built-in types and org's own.
func newCatalogue(org []domain.RelationType) *Catalogue {
	c := &Catalogue{byName: map[string]TypeRef{}}
	for _, t := range append(slices.Clone(BuiltinRelationTypes), org...) {
		c.types = append(c.types, t)
		c.byName[t.Name] = TypeRef{Type: t}
		if t.Symmetric {
			c.sym = append(c.sym, t.Name)
		} else {
			c.byName[t.Inverse] = TypeRef{Type: t, Reversed: true}
		}
	}
	return c
}

// names lists every name a caller may use, sorted.
func (c *Catalogue) names(writable bool) []string {
	var out []string
	for n, r := range c.byName {
		if writable && r.Type.ReadOnly {
			continue
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Lookup is what name means in the catalogue (a type's name or inverse,
// as is: no check of its spelling), and whether it is there.
func (c *Catalogue) Lookup(name string) (TypeRef, bool) {
	r, ok := c.byName[name]
	return r, ok
}

// Resolve finds name in the catalogue; field names the argument for errors.
func (c *Catalogue) Resolve(field, name string, writable bool) (TypeRef, error) {
	name, err := domain.TypeName(field, name)
	if err != nil {
		return TypeRef{}, err
	}
	r, ok := c.byName[name]
	if !ok {
		return TypeRef{}, errs.InvalidArgument(field, "unknown relation type %q; known: %s (an operator adds an org's own with ctl relation-type add)",
			name, strings.Join(c.names(writable), ", "))
	}
	if writable && r.Type.ReadOnly {
		return TypeRef{}, errs.InvalidArgument(field, "%s is derived from supersession and read only: use supersede_knowledge to record that one entry replaces another", name)
	}
	return r, nil
}

// InverseOf names a stored type as read from its to end.
func (c *Catalogue) InverseOf(stored string) string {
	if r, ok := c.byName[stored]; ok && !r.Reversed {
		return r.Type.Inverse
	}
	return stored
}

// Symmetric tells whether a stored type reads the same from both ends.
func (c *Catalogue) Symmetric(stored string) bool {
	r, ok := c.byName[stored]
	return ok && r.Type.Symmetric
}

// builtinCatalogue is the catalogue of the built-in types alone.
var builtinCatalogue = newCatalogue(nil)

// writableCatalogue is what Link and Unlink resolve name with: the
// built-in catalogue when it knows the name (an org's own types never
// clash with a built-in name or inverse, so the org's table need not be
// read: one round trip less on every link of a built-in type), else the
// org's whole catalogue.
func writableCatalogue(ctx context.Context, q *sqlc.Queries, org uuid.UUID, name string) (*Catalogue, error) {
	if _, ok := builtinCatalogue.byName[name]; ok {
		return builtinCatalogue, nil
	}
	return CatalogueOf(ctx, q, org)
}

// CatalogueOf reads the org's own types (one small index range) and
// builds its catalogue, with q (the pool's queries or a transaction's).
// ctx must carry the org (data.AsOrg).
func CatalogueOf(ctx context.Context, q *sqlc.Queries, org uuid.UUID) (*Catalogue, error) {
	rows, err := q.ListOrgRelationTypes(ctx, org)
	if err != nil {
		return nil, data.MapErr(err, "")
	}
	own := make([]domain.RelationType, 0, len(rows))
	for _, r := range rows {
		own = append(own, domain.RelationType{Name: r.Name, Inverse: r.Inverse, Symmetric: r.Name == r.Inverse})
	}
	return newCatalogue(own), nil
}

// RelationTypes lists the catalogue of the caller's org: the built-in
// types and the org's own.
func (s *Relations) RelationTypes(ctx context.Context, c domain.Caller) (_ []domain.RelationType, err error) {
	defer data.WrapOp(&err, "knowledge.RelationTypes")
	if err := domain.CheckCaller(c, false); err != nil {
		return nil, err
	}
	cat, err := CatalogueOf(ctx, s.data.Q(), c.OrgID)
	if err != nil {
		return nil, err
	}
	return cat.types, nil
}

// AddRelationType adds an org's own relation type (ctl relation-type add,
// operators): name and its inverse, or a symmetric type (inverse "" or the
// name itself). Neither name may already be a name or an inverse in the
// org's catalogue (built-in or the org's), so every name means one thing.
func (s *Relations) AddRelationType(ctx context.Context, org uuid.UUID, name, inverse string, symmetric bool) (_ *domain.RelationType, err error) {
	defer data.WrapOp(&err, "knowledge.AddRelationType")
	if org == uuid.Nil {
		return nil, errs.InvalidArgument("org", "is required")
	}
	if name, err = domain.TypeName("name", name); err != nil {
		return nil, err
	}
	if inverse != "" {
		if inverse, err = domain.TypeName("inverse", inverse); err != nil {
			return nil, err
		}
	}
	switch {
	case symmetric && inverse != "" && inverse != name:
		return nil, errs.InvalidArgument("inverse", "give an inverse or a symmetric type, not both")
	case symmetric:
		inverse = name
	case inverse == "":
		return nil, errs.InvalidArgument("inverse", "is required unless the type is symmetric")
	case inverse == name:
		return nil, errs.InvalidArgument("inverse", "equals the name: a type that reads the same from both ends is symmetric")
	}
	var out *domain.RelationType
	err = pgx.BeginFunc(ctx, s.data.Scoped(), func(tx pgx.Tx) error {
		q := sqlc.New(tx)
		if err := q.LockOrgRelationTypes(ctx, org.String()); err != nil {
			return err
		}
		cat, err := CatalogueOf(ctx, q, org)
		if err != nil {
			return err
		}
		for _, n := range []struct{ field, v string }{{"name", name}, {"inverse", inverse}} {
			if r, ok := cat.byName[n.v]; ok {
				return &errs.Error{Code: errs.CodeConflict, Field: n.field, Message: fmt.Sprintf(
					"%s is already in the org's catalogue (type %s, inverse %s)", n.v, r.Type.Name, r.Type.Inverse)}
			}
		}
		row, err := q.InsertRelationType(ctx, sqlc.InsertRelationTypeParams{OrgID: org, Name: name, Inverse: inverse})
		if err != nil {
			return err
		}
		out = &domain.RelationType{Name: row.Name, Inverse: row.Inverse, Symmetric: row.Name == row.Inverse}
		return nil
	})
	if err != nil {
		return nil, data.MapErr(err, "org")
	}
	return out, nil
}

// stored is a relation as its row holds it: canonical type, ends ordered.
type stored struct {
	from, to uuid.UUID
	ref      TypeRef
}

// canonical maps the caller's (from, name, to) to the stored row's key: an
// inverse name is stored from the other end, a symmetric type with the
// smaller id first.
func canonical(from, to uuid.UUID, r TypeRef) stored {
	if r.Reversed || (r.Type.Symmetric && bytes.Compare(to[:], from[:]) < 0) {
		from, to = to, from
	}
	return stored{from: from, to: to, ref: r}
}

func (s *Relations) checkLinkArgs(c domain.Caller, from, to uuid.UUID) error {
	if err := domain.CheckCaller(c, false); err != nil {
		return err
	}
	switch {
	case from == uuid.Nil:
		return errs.InvalidArgument("fromId", "is required")
	case to == uuid.Nil:
		return errs.InvalidArgument("toId", "is required")
	case from == to:
		return errs.InvalidArgument("toId", "must differ from fromId: an entry cannot be related to itself")
	}
	return nil
}

// Link records a typed relation fromID -type-> toID between two live
// entries of the caller's org (link_knowledge; task runners may call it
// with AgentID = uuid.Nil). No authorship of either entry is needed. An id
// that is missing, forgotten or of another org is not_found naming it; a
// self link, an unknown type (the error lists the known ones) and a read
// only type (SUPERSEDES: use Supersede) are invalid_argument on the
// field (a type is normalised first, domain.TypeName: "fixes" is FIXES); an open relation of the same type between the same entries
// answers it with Existed. Past MaxRelationsPerEntry open relations on
// either end: conflict naming the end.
func (s *Relations) Link(ctx context.Context, c domain.Caller, in domain.LinkInput) (_ *domain.RelationChange, err error) {
	defer data.WrapOp(&err, "knowledge.Link")
	if err := s.checkLinkArgs(c, in.FromID, in.ToID); err != nil {
		return nil, err
	}
	if in.Type, err = domain.TypeName("type", in.Type); err != nil {
		return nil, err
	}
	var note *string
	if in.Note != "" {
		switch {
		case !utf8.ValidString(in.Note) || strings.ContainsRune(in.Note, 0):
			return nil, errs.InvalidArgument("note", "must be valid UTF-8 text without NUL bytes")
		case strings.TrimSpace(in.Note) == "":
			return nil, errs.InvalidArgument("note", "must not be blank (leave it out instead)")
		case utf8.RuneCountInString(in.Note) > domain.MaxRelationNote:
			return nil, errs.InvalidArgument("note", "must be at most %d characters", domain.MaxRelationNote)
		}
		note = &in.Note
	}
	var agent *uuid.UUID
	if c.AgentID != uuid.Nil {
		agent = &c.AgentID
	}
	var out *domain.RelationChange
	err = s.data.RetryTx(ctx, func(tx pgx.Tx) error {
		q := sqlc.New(tx)
		cat, err := writableCatalogue(ctx, q, c.OrgID, in.Type)
		if err != nil {
			return err
		}
		ref, err := cat.Resolve("type", in.Type, true)
		if err != nil {
			return err
		}
		st := canonical(in.FromID, in.ToID, ref)
		if err := lockEnds(ctx, q, c.OrgID, in.FromID, in.ToID); err != nil {
			return err
		}
		// One statement on the common path: the insert, if under the cap
		// and not open already; only when it wrote nothing is it asked why.
		r, err := q.InsertRelationCapped(ctx, sqlc.InsertRelationCappedParams{
			ID: uuid.New(), OrgID: c.OrgID, FromID: st.from, ToID: st.to, Type: ref.Type.Name, Note: note, AgentID: agent, MaxOpen: domain.MaxRelationsPerEntry})
		if err == nil {
			out = change(in.FromID, in.ToID, in.Type, cat, relationRow(sqlc.GetOpenRelationRow(r)))
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		key := sqlc.GetOpenRelationParams{OrgID: c.OrgID, FromID: st.from, Type: ref.Type.Name, ToID: st.to}
		if r, err := q.GetOpenRelation(ctx, key); err == nil {
			out = change(in.FromID, in.ToID, in.Type, cat, relationRow(r))
			out.Existed = true
			return nil
		} else if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		n, err := q.CountOpenRelations(ctx, sqlc.CountOpenRelationsParams{OrgID: c.OrgID, A: in.FromID, B: in.ToID})
		if err != nil {
			return err
		}
		for _, e := range []struct {
			field string
			n     int64
		}{{"fromId", n.ACount}, {"toId", n.BCount}} {
			if e.n >= domain.MaxRelationsPerEntry {
				return &errs.Error{Code: errs.CodeConflict, Field: e.field, Message: fmt.Sprintf(
					"the entry already has %d open relations, the per-entry cap; unlink some (unlink_knowledge) before adding more", e.n)}
			}
		}
		// Neither: impossible under the locks; refuse rather than guess.
		return &errs.Error{Code: errs.CodeConflict, Retryable: true, Message: "changed concurrently; retry"}
	})
	if err != nil {
		return nil, data.MapErr(err, "")
	}
	return out, nil
}

// Unlink closes the open relation fromID -type-> toID (unlink_knowledge):
// its row stays, with validTo and who closed it, so list_relations with
// includeClosed or asOf still reads it. A relation closed before answers
// AlreadyClosed; one that never existed is not_found on type. The ends
// must be live entries of the org (not_found naming the field).
func (s *Relations) Unlink(ctx context.Context, c domain.Caller, fromID, toID uuid.UUID, typ string) (_ *domain.RelationChange, err error) {
	defer data.WrapOp(&err, "knowledge.Unlink")
	if err := s.checkLinkArgs(c, fromID, toID); err != nil {
		return nil, err
	}
	if typ, err = domain.TypeName("type", typ); err != nil {
		return nil, err
	}
	var agent *uuid.UUID
	if c.AgentID != uuid.Nil {
		agent = &c.AgentID
	}
	var out *domain.RelationChange
	err = s.data.RetryTx(ctx, func(tx pgx.Tx) error {
		q := sqlc.New(tx)
		cat, err := writableCatalogue(ctx, q, c.OrgID, typ)
		if err != nil {
			return err
		}
		ref, err := cat.Resolve("type", typ, true)
		if err != nil {
			return err
		}
		st := canonical(fromID, toID, ref)
		if err := lockEnds(ctx, q, c.OrgID, fromID, toID); err != nil {
			return err
		}
		r, err := q.CloseRelation(ctx, sqlc.CloseRelationParams{OrgID: c.OrgID, FromID: st.from, Type: ref.Type.Name, ToID: st.to, AgentID: agent})
		if err == nil {
			out = change(fromID, toID, typ, cat, relationRow(sqlc.GetOpenRelationRow(r)))
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		last, err := q.LastClosedRelation(ctx, sqlc.LastClosedRelationParams{OrgID: c.OrgID, FromID: st.from, Type: ref.Type.Name, ToID: st.to})
		if errors.Is(err, pgx.ErrNoRows) {
			return &errs.Error{Code: errs.CodeNotFound, Field: "type", Message: fmt.Sprintf("no %s relation from fromId to toId (list_relations shows an entry's relations)", typ)}
		}
		if err != nil {
			return err
		}
		out = change(fromID, toID, typ, cat, relationRow(sqlc.GetOpenRelationRow(last)))
		out.AlreadyClosed = true
		return nil
	})
	if err != nil {
		return nil, data.MapErr(err, "")
	}
	return out, nil
}

// lockEnds locks both entries (see LockRelationEnds) and says which is
// missing: a forgotten entry, one of another org and one that never
// existed are alike.
func lockEnds(ctx context.Context, q *sqlc.Queries, org, from, to uuid.UUID) error {
	rows, err := q.LockRelationEnds(ctx, sqlc.LockRelationEndsParams{OrgID: org, Ids: []uuid.UUID{from, to}})
	if err != nil {
		return err
	}
	found := map[uuid.UUID]bool{}
	for _, r := range rows {
		found[r.ID] = true
	}
	if !found[from] {
		return &errs.Error{Code: errs.CodeNotFound, Field: "fromId", Message: "no such entry in this org"}
	}
	if !found[to] {
		return &errs.Error{Code: errs.CodeNotFound, Field: "toId", Message: "no such entry in this org"}
	}
	return nil
}

type relRow struct {
	id                     uuid.UUID
	note                   *string
	author                 *uuid.UUID
	validFrom              time.Time
	validTo                *time.Time
	storedFrom, storedType string
}

func relationRow(r sqlc.GetOpenRelationRow) relRow {
	return relRow{id: r.ID, note: r.Note, author: r.CreatedByAgentID, validFrom: r.ValidFrom, validTo: r.ValidTo,
		storedFrom: r.FromID.String(), storedType: r.Type}
}

func change(from, to uuid.UUID, typ string, cat *Catalogue, r relRow) *domain.RelationChange {
	out := &domain.RelationChange{ID: r.id, FromID: from, ToID: to, Type: typ, CreatedByAgentID: r.author,
		ValidFrom: r.validFrom, ValidTo: r.validTo}
	if ref, ok := cat.byName[typ]; ok {
		switch {
		case ref.Type.Symmetric:
			out.Inverse = typ
		case ref.Reversed:
			out.Inverse = ref.Type.Name
		default:
			out.Inverse = ref.Type.Inverse
		}
	}
	if r.note != nil {
		out.Note = *r.note
	}
	return out
}

type relCursor struct {
	ID     uuid.UUID `json:"i"`
	Filter string    `json:"f"`
	Time   time.Time `json:"t"`
	Key    string    `json:"k"`
}

// Relations lists an entry's relations, newest first (list_relations):
// open ones, or those valid at AsOf; with IncludeClosed also those closed
// since (or, with AsOf, by then). Supersession shows as read-only
// SUPERSEDES / SUPERSEDED_BY relations. Keyset-paged: NextCursor
// continues after the page's last relation; a cursor belongs to the entry
// and filters that made it (else invalid_argument on cursor).
func (s *Relations) Relations(ctx context.Context, c domain.Caller, in domain.RelationsInput) (_ *domain.RelationsResult, err error) {
	defer data.WrapOp(&err, "knowledge.Relations")
	if err := domain.CheckCaller(c, false); err != nil {
		return nil, err
	}
	if in.ID == uuid.Nil {
		return nil, errs.InvalidArgument("id", "is required")
	}
	limit := domain.ValueOr(in.Limit, domain.DefaultRelationsLimit)
	if err := domain.CheckRange("limit", limit, 1, domain.MaxRelationsLimit); err != nil {
		return nil, err
	}
	asOf, err := domain.CheckAsOf(in.AsOf, s.now())
	if err != nil {
		return nil, err
	}
	p := sqlc.ListRelationsParams{OrgID: c.OrgID, ID: in.ID, AsOf: asOf, IncludeClosed: in.IncludeClosed, MaxRows: int32(limit) + 1}
	if err := wantDirection(&p, in.Direction); err != nil {
		return nil, err
	}
	cat, err := CatalogueOf(ctx, s.data.Q(), c.OrgID)
	if err != nil {
		return nil, err
	}
	if in.Types, err = domain.TypeNames("types", in.Types); err != nil {
		return nil, err
	}
	if err := wantTypes(&p, cat, in.Types); err != nil {
		return nil, err
	}
	filter := relFilterDigest(in, asOf)
	if in.Cursor != "" {
		cur, err := decodeRelCursor(in.Cursor)
		if err != nil || cur.ID != in.ID || cur.Filter != filter {
			return nil, errs.InvalidArgument("cursor", "is not a cursor of this listing (pass back nextCursor unchanged, with the same id, direction, types, asOf and includeClosed)")
		}
		p.AfterTime, p.AfterKey = &cur.Time, cur.Key
	}
	rows, err := s.data.Q().ListRelations(ctx, p)
	if err != nil {
		return nil, data.MapErr(err, "")
	}
	if len(rows) == 0 && in.Cursor == "" {
		// An entry without relations, or none at all: tell them apart.
		if _, err := s.data.Q().GetEntry(ctx, sqlc.GetEntryParams{OrgID: c.OrgID, ID: in.ID}); err != nil {
			return nil, data.MapErr(err, "id")
		}
	}
	return relationsPage(cat, rows, limit, relCursor{ID: in.ID, Filter: filter}, s.now()), nil
}

// wantDirection sets the ends of the relations a listing reads from its
// direction ("" is both).
func wantDirection(p *sqlc.ListRelationsParams, dir string) error {
	switch dir {
	case "", domain.DirBoth:
		p.WantOut, p.WantIn = true, true
	case domain.DirOut:
		p.WantOut = true
	case domain.DirIn:
		p.WantIn = true
	default:
		return errs.InvalidArgument("direction", "must be one of: out, in, both (got %s)", domain.QuoteType(dir))
	}
	return nil
}

// wantTypes sets the types a listing reads, each named from the entry's
// end (an inverse name reads the type's incoming relations; nil: every
// type, supersession included), after wantDirection; types are the
// caller's, normalised and counted by domain.TypeNames.
func wantTypes(p *sqlc.ListRelationsParams, cat *Catalogue, types []string) error {
	p.SymTypes = domain.NonNil(cat.sym)
	if types == nil {
		p.WantSupersedes, p.WantSupersededBy = p.WantOut, p.WantIn
		return nil
	}
	p.OutTypes, p.InTypes = []string{}, []string{}
	for i, n := range types {
		r, err := cat.Resolve(fmt.Sprintf("types[%d]", i), n, false)
		if err != nil {
			return err
		}
		switch {
		case r.Type.Name == domain.RelSupersedes && !r.Reversed:
			p.WantSupersedes = p.WantOut
		case r.Type.Name == domain.RelSupersedes:
			p.WantSupersededBy = p.WantIn
		case r.Type.Symmetric:
			p.OutTypes = append(p.OutTypes, r.Type.Name)
			p.InTypes = append(p.InTypes, r.Type.Name)
		case r.Reversed:
			p.InTypes = append(p.InTypes, r.Type.Name)
		default:
			p.OutTypes = append(p.OutTypes, r.Type.Name)
		}
	}
	return nil
}

// relationsPage is the first limit rows (of limit+1 read) as relations,
// with the cursor after the last when there are more (next holds the
// cursor's entry and filter).
func relationsPage(cat *Catalogue, rows []sqlc.ListRelationsRow, limit int, next relCursor, now time.Time) *domain.RelationsResult {
	res := &domain.RelationsResult{Relations: make([]domain.Relation, 0, min(len(rows), limit))}
	for i, r := range rows {
		if i == limit {
			last := rows[i-1]
			next.Time, next.Key = last.ValidFrom, last.Key
			res.NextCursor = encodeRelCursor(next)
			break
		}
		res.Relations = append(res.Relations, readRelation(cat, r.Key, r.Type, r.Dir, r.OtherID, r.Title, r.SupersededBy, r.ExpiresAt,
			r.Note, r.CreatedByAgentID, r.ValidFrom, r.ValidTo, now))
	}
	return res
}

// readRelation names a stored relation as read from one of its ends.
func readRelation(cat *Catalogue, key, typ, dir string, other uuid.UUID, title string, supersededBy *uuid.UUID, expiresAt *time.Time,
	note *string, author *uuid.UUID, from time.Time, to *time.Time, now time.Time) domain.Relation {
	rel := domain.Relation{Type: typ, Direction: dir, OtherID: other, OtherTitle: title, OtherState: domain.StateOf(supersededBy, expiresAt, now),
		CreatedByAgentID: author, ValidFrom: from, ValidTo: to, Derived: strings.HasPrefix(key, "s")}
	if !rel.Derived {
		if id, err := uuid.Parse(strings.TrimPrefix(key, "r")); err == nil {
			rel.ID = &id
		}
	}
	switch {
	case cat.Symmetric(typ):
		rel.Direction = domain.DirBoth
	case dir == domain.DirIn:
		rel.Type = cat.InverseOf(typ)
	}
	if note != nil {
		rel.Note = *note
	}
	return rel
}

func relFilterDigest(in domain.RelationsInput, asOf *time.Time) string {
	types := slices.Clone(in.Types)
	slices.Sort(types)
	a := ""
	if asOf != nil {
		a = asOf.UTC().Format(time.RFC3339Nano)
	}
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s|%q|%s|%t|%t", in.Direction, types, a, in.IncludeClosed, in.Types != nil)))
	return base64.RawURLEncoding.EncodeToString(sum[:9])
}

func encodeRelCursor(c relCursor) string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeRelCursor(s string) (*relCursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, err
	}
	var c relCursor
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

// Summary is an entry's relations as get_knowledge answers them: the open
// ones counted by type (named from the entry's end) and the newest few.
func (s *Relations) Summary(ctx context.Context, c domain.Caller, id uuid.UUID) (*domain.RelationSummary, error) {
	counts, err := s.data.Q().RelationCounts(ctx, sqlc.RelationCountsParams{OrgID: c.OrgID, ID: id})
	if err != nil {
		return nil, data.MapErr(err, "")
	}
	sum := &domain.RelationSummary{ByType: []domain.RelationCount{}, First: []domain.Relation{}}
	if len(counts) == 0 {
		return sum, nil
	}
	cat, err := CatalogueOf(ctx, s.data.Q(), c.OrgID)
	if err != nil {
		return nil, err
	}
	by := map[string]int64{}
	for _, r := range counts {
		name := r.Type
		if r.Dir == domain.DirIn && !cat.Symmetric(r.Type) {
			name = cat.InverseOf(r.Type)
		}
		by[name] += r.N
		sum.Open += r.N
	}
	for n, k := range by {
		sum.ByType = append(sum.ByType, domain.RelationCount{Type: n, Count: k})
	}
	slices.SortFunc(sum.ByType, func(a, b domain.RelationCount) int {
		if a.Count != b.Count {
			return int(b.Count - a.Count)
		}
		return strings.Compare(a.Type, b.Type)
	})
	rows, err := s.data.Q().ListRelations(ctx, sqlc.ListRelationsParams{OrgID: c.OrgID, ID: id, WantOut: true, WantIn: true,
		SymTypes: domain.NonNil(cat.sym), WantSupersedes: true, WantSupersededBy: true, MaxRows: domain.RelationSummaryFirst})
	if err != nil {
		return nil, data.MapErr(err, "")
	}
	now := s.now()
	for _, r := range rows {
		sum.First = append(sum.First, readRelation(cat, r.Key, r.Type, r.Dir, r.OtherID, r.Title, r.SupersededBy, r.ExpiresAt,
			r.Note, r.CreatedByAgentID, r.ValidFrom, r.ValidTo, now))
	}
	return sum, nil
}

// LinkParts makes each of sections PART_OF doc (a document's sections,
// documents/documents.go), in the caller's transaction, by agent. Not capped per
// entry: MaxDocumentSections bounds them.
func LinkParts(ctx context.Context, q *sqlc.Queries, org, agent, doc uuid.UUID, sections []uuid.UUID) error {
	if len(sections) == 0 {
		return nil
	}
	ids := make([]uuid.UUID, len(sections))
	for i := range ids {
		ids[i] = uuid.New()
	}
	return q.InsertPartOfRelations(ctx, sqlc.InsertPartOfRelationsParams{OrgID: org, DocumentID: doc, SectionIds: sections, RelationIds: ids, AgentID: &agent})
}

// UnlinkParts closes the open PART_OF relations of sections to doc (they
// left it: changed, retired, or moved to the document's new entry); the
// rows stay, so the relations read as of a past time still hold them.
func UnlinkParts(ctx context.Context, q *sqlc.Queries, org, agent, doc uuid.UUID, sections []uuid.UUID) error {
	if len(sections) == 0 {
		return nil
	}
	return q.ClosePartOfRelations(ctx, sqlc.ClosePartOfRelationsParams{OrgID: org, DocumentID: doc, SectionIds: sections, AgentID: &agent})
}
