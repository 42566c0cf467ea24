package knowledge

import (
	"context"
	"fmt"
	"strconv"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	domain "github.com/agentfleet/orchestrator/packages/knowledge"
)

// relationsPerEntry is MaxRelationsPerEntry as the descriptions write it.
var relationsPerEntry = groupThousands(domain.MaxRelationsPerEntry)

// groupThousands writes n with a comma between thousands (1,000).
func groupThousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// parseEnds decodes a relation's two ends.
func parseEnds(from, to string) (uuid.UUID, uuid.UUID, error) {
	f, err := parseID("fromId", from)
	if err != nil {
		return f, uuid.Nil, err
	}
	t, err := parseID("toId", to)
	return f, t, err
}

// typeNames is the built-in catalogue, for descriptions.
func typeNames() string {
	s := ""
	for i, t := range domain.BuiltinRelationTypes {
		if i > 0 {
			s += ", "
		}
		switch {
		case t.ReadOnly:
			s += fmt.Sprintf("%s / %s (read only: from supersede_knowledge)", t.Name, t.Inverse)
		case t.Symmetric:
			s += t.Name + " (symmetric)"
		default:
			s += t.Name + " / " + t.Inverse
		}
	}
	return s
}

// relationTypeSchema states the length of a relation type's name. No
// pattern: the domain normalises a name before its rule (fixes is FIXES,
// fixed-by is FIXED_BY), so the pattern of the normalised form would refuse
// names the tools accept.
func relationTypeSchema(s *jsonschema.Schema) {
	lengthSchema(s, domain.MinRelationTypeChars, domain.MaxRelationTypeChars)
}

// typeRule is how the descriptions state a relation type's form.
const typeRule = "case and separators are normalised as for tags (trimmed, upper-cased, spaces and '-' become '_': fixes is FIXES, fixed-by is FIXED_BY)"

// relationTypesSchema states the limits of a filter of relation types.
func relationTypesSchema(s *jsonschema.Schema) {
	s.MaxItems = iptr(domain.MaxRelationTypes)
	relationTypeSchema(s.Items)
}

// LinkArgs are the arguments of link_knowledge.
type LinkArgs struct {
	FromID      string `json:"fromId" jsonschema:"The entry the relation goes from."`
	ToID        string `json:"toId" jsonschema:"The entry it goes to."`
	Type        string `json:"type"`
	Note        string `json:"note,omitempty"`
	ClientToken string `json:"clientToken,omitempty" jsonschema:"Optional UUID; linking is idempotent by itself (a repeat answers the open relation with existed: true), so it is only checked to be a UUID."`
}

func linkTool() *mcp.Tool {
	return &mcp.Tool{
		Name:  ToolLink,
		Title: "Link knowledge",
		Description: `Record a typed relation between two entries of your organisation: a runbook FIXES an incident, a decision DEPENDS_ON a benchmark, a finding CONTRADICTS an older one, a note is PART_OF an investigation. Both ends read it: the other end sees the inverse name (the incident is FIXED_BY the runbook); a symmetric type reads the same from both. You need not be the author of either entry, but both must exist (forgotten entries do not).

Types (name / inverse): ` + typeNames() + `. Your organisation may have its own (an operator adds them); an unknown type is refused with the list of known ones. Type names are UPPER_SNAKE_CASE; ` + typeRule + `.

Returns the relation (id, fromId, toId, type, inverse, note, createdByAgentId, validFrom) and existed: true when the same relation was already open (nothing changed; safe to retry). An entry may be an end of at most ` + relationsPerEntry + ` open relations.

Errors: invalid_argument (not UUIDs, fromId = toId, a type that is not UPPER_SNAKE_CASE once normalised, or unknown, SUPERSEDES / SUPERSEDED_BY: use supersede_knowledge, a note over ` + itoa(domain.MaxRelationNote) + ` characters), not_found (an id is not an entry of your organisation), conflict (an end already has ` + relationsPerEntry + ` open relations), unavailable (retry later).`,
		InputSchema: inputSchema[LinkArgs](func(p map[string]*jsonschema.Schema) {
			uuidSchema(p["fromId"])
			uuidSchema(p["toId"])
			relationTypeSchema(p["type"])
			describe(p, "type", "The relation type read from fromId: a catalogue type or its inverse name (fromId REQUIRED_BY toId is toId DEPENDS_ON fromId); %s.", typeRule)
			lengthSchema(p["note"], 1, domain.MaxRelationNote)
			describe(p, "note", "Why the entries are related, at most %d characters.", domain.MaxRelationNote)
			uuidSchema(p["clientToken"])
		}),
		Annotations: &mcp.ToolAnnotations{
			Title:           "Link knowledge",
			ReadOnlyHint:    false,
			DestructiveHint: new(false),
			IdempotentHint:  true,
			OpenWorldHint:   new(false),
		},
	}
}

func (t *toolset) link(ctx context.Context, c domain.Caller, a *LinkArgs) (*domain.RelationChange, error) {
	from, to, err := parseEnds(a.FromID, a.ToID)
	if err != nil {
		return nil, err
	}
	// Linking is idempotent by itself: clientToken is only decoded.
	if _, err := parseUUID("clientToken", a.ClientToken); err != nil {
		return nil, err
	}
	return t.svc.Link(ctx, c, domain.LinkInput{FromID: from, ToID: to, Type: a.Type, Note: a.Note})
}

// UnlinkArgs are the arguments of unlink_knowledge.
type UnlinkArgs struct {
	FromID string `json:"fromId" jsonschema:"The entry the relation goes from."`
	ToID   string `json:"toId" jsonschema:"The entry it goes to."`
	Type   string `json:"type"`
}

func unlinkTool() *mcp.Tool {
	return &mcp.Tool{
		Name:  ToolUnlink,
		Title: "Unlink knowledge",
		Description: `Close a relation between two entries that no longer holds. Nothing is deleted: the relation keeps its history (validFrom, validTo), list_relations shows it with includeClosed or asOf a time it was open, and linking again opens a new one.

Returns the relation with validTo, and alreadyClosed: true when it had been closed before (nothing changed; safe to retry).

Errors: invalid_argument (not UUIDs, fromId = toId, a bad or unknown type), not_found (an id is not an entry of your organisation, or no such relation between them, field type), unavailable (retry later).`,
		InputSchema: inputSchema[UnlinkArgs](func(p map[string]*jsonschema.Schema) {
			uuidSchema(p["fromId"])
			uuidSchema(p["toId"])
			relationTypeSchema(p["type"])
			describe(p, "type", "The relation type, as link_knowledge took it (or its inverse name, from the other end); %s.", typeRule)
		}),
		Annotations: &mcp.ToolAnnotations{
			Title:           "Unlink knowledge",
			ReadOnlyHint:    false,
			DestructiveHint: new(false),
			IdempotentHint:  true,
			OpenWorldHint:   new(false),
		},
	}
}

func (t *toolset) unlink(ctx context.Context, c domain.Caller, a *UnlinkArgs) (*domain.RelationChange, error) {
	from, to, err := parseEnds(a.FromID, a.ToID)
	if err != nil {
		return nil, err
	}
	return t.svc.Unlink(ctx, c, from, to, a.Type)
}

// RelationsArgs are the arguments of list_relations.
type RelationsArgs struct {
	ID            string   `json:"id" jsonschema:"The entry whose relations to list."`
	Direction     string   `json:"direction,omitempty" jsonschema:"out (the entry is the relation's from end), in, or both (default). Symmetric relations are listed in every direction."`
	Types         []string `json:"types,omitempty"`
	AsOf          string   `json:"asOf,omitempty" jsonschema:"The relations valid at this past RFC 3339 date-time."`
	IncludeClosed bool     `json:"includeClosed,omitempty" jsonschema:"Also relations closed since (with asOf: closed by then). Default false."`
	Limit         *int     `json:"limit,omitempty"`
	Cursor        string   `json:"cursor,omitempty" jsonschema:"nextCursor of the previous page, exactly as given, with the same other arguments."`
}

func relationsTool() *mcp.Tool {
	return &mcp.Tool{
		Name:  ToolRelations,
		Title: "List relations",
		Description: `List the typed relations of one entry of your organisation, newest first: what it depends on, fixes, contradicts, is part of, and what relates to it. Each relation says its type as read from this entry (an inbound DEPENDS_ON reads REQUIRED_BY), direction (out, in, or both for a symmetric type), the other entry (otherId, otherTitle, otherState: head, superseded or expired), note, createdByAgentId, validFrom and, once closed, validTo. Supersession shows as read-only SUPERSEDES / SUPERSEDED_BY relations (derived: true).

Pass nextCursor back as cursor, with the same arguments, for the next page.

Errors: invalid_argument (names the argument: a bad UUID, direction, type, date-time, limit or cursor), not_found (id is not an entry of your organisation), unavailable (retry later).`,
		InputSchema: inputSchema[RelationsArgs](func(p map[string]*jsonschema.Schema) {
			uuidSchema(p["id"])
			p["direction"].Enum = []any{domain.DirOut, domain.DirIn, domain.DirBoth}
			p["direction"].Default = []byte(`"` + domain.DirBoth + `"`)
			relationTypesSchema(p["types"])
			describe(p, "types", "Only these types, named as read from the entry (an inverse name such as FIXED_BY lists the entries that fix it); %s.", typeRule)
			p["asOf"].Format = "date-time"
			p["includeClosed"].Default = []byte("false")
			intSchema(p["limit"], 1, domain.MaxRelationsLimit, domain.DefaultRelationsLimit)
			describe(p, "limit", "Relations per page, 1 to %d. Default %d.", domain.MaxRelationsLimit, domain.DefaultRelationsLimit)
		}),
		Annotations: &mcp.ToolAnnotations{
			Title:           "List relations",
			ReadOnlyHint:    true,
			DestructiveHint: new(false),
			IdempotentHint:  true,
			OpenWorldHint:   new(false),
		},
	}
}

func (t *toolset) relations(ctx context.Context, c domain.Caller, a *RelationsArgs) (*domain.RelationsResult, error) {
	id, err := parseID("id", a.ID)
	if err != nil {
		return nil, err
	}
	in := domain.RelationsInput{ID: id, Direction: a.Direction, Types: a.Types, IncludeClosed: a.IncludeClosed, Cursor: a.Cursor, Limit: a.Limit}
	if in.AsOf, err = parseTime("asOf", a.AsOf); err != nil {
		return nil, err
	}
	return t.svc.Relations(ctx, c, in)
}
