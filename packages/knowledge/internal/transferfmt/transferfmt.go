// Package transferfmt is the file format of knowledge's export and import
// (docs/operators.md): JSON Lines, one record a line, each with a "kind":
// a Header, then the org's Agents, its own RelationTypes, the Tasks its
// entries are linked to, its Entries oldest first, the Documents among
// them and their Sections, the recorded Supersessions, the TaskLinks and
// the Relations (open and closed; a section's PART_OF its document is
// one).
package transferfmt

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/errs"
)

// Format and Version name the file format. An import refuses a newer
// version: its meaning may have changed. Version 2 added the entry fields:
// an entry's "source" of version 1 was who made it, now "origin"
// (VersionOrigin: an import reads a version 1 source as the origin).
const (
	Format        = "agentfleet-knowledge"
	Version       = 2
	VersionOrigin = 2
)

// The kinds of record, each line's "kind".
const (
	KindHeader       = "header"
	KindAgent        = "agent"
	KindTask         = "task"
	KindRelationType = "relationType"
	KindEntry        = "entry"
	KindSupersession = "supersession"
	KindTaskLink     = "taskLink"
	KindRelation     = "relation"
	KindDocument     = "document"
	KindSection      = "section"
)

// Header is the file's first line.
type Header struct {
	Kind    string `json:"kind"` // "header"
	Format  string `json:"format"`
	Version int    `json:"version"`
	Vectors bool   `json:"vectors"`
}

// Agent is an agent of the org (authorship).
type Agent struct {
	Kind      string    `json:"kind"` // "agent"
	ID        uuid.UUID `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
}

// Task is a task the org's entries are linked to.
type Task struct {
	Kind      string    `json:"kind"` // "task"
	ID        uuid.UUID `json:"id"`
	Title     string    `json:"title"`
	CreatedAt time.Time `json:"createdAt"`
}

// Vector is a ready entry's vector, in exports with vectors.
type Vector struct {
	Model      string     `json:"model"`
	EmbeddedAt *time.Time `json:"embeddedAt,omitempty"`
	Vector     []float32  `json:"vector"`
}

// Entry is an entry, with its chain as stored.
type Entry struct {
	Kind       string    `json:"kind"` // "entry"
	ID         uuid.UUID `json:"id"`
	Title      string    `json:"title"`
	Body       string    `json:"body"`
	Tags       []string  `json:"tags"`
	Confidence int16     `json:"confidence"`
	// Origin is who made the entry ("agent", "operator", "import"); in
	// files of version 1 it was written as "source".
	Origin string `json:"origin,omitempty"`
	// Source (provenance), EntryKind (its memory kind: "kind" names the
	// record) and Metadata (a flat object) are the agent's entry fields;
	// missing in files of version 1: none, the default kind, none.
	Source        string          `json:"source,omitempty"`
	EntryKind     string          `json:"entryKind,omitempty"`
	Metadata      json.RawMessage `json:"metadata,omitempty"`
	AuthorAgentID *uuid.UUID      `json:"authorAgentId"`
	ExpiresAt     *time.Time      `json:"expiresAt"`
	// ClientToken is read from files of earlier exports and ignored: a
	// client token is a 60-second idempotence key, not knowledge, and
	// importing it could clash with another entry of the agent holding the
	// same token in the target org (the unique org, agent, token key), so
	// exports no longer write it and imports store none.
	ClientToken  *uuid.UUID `json:"clientToken,omitempty"`
	SupersededBy *uuid.UUID `json:"supersededBy"`
	HeadID       *uuid.UUID `json:"headId"`
	SupersededAt *time.Time `json:"supersededAt"`
	CreatedAt    time.Time  `json:"createdAt"`
	UpdatedAt    time.Time  `json:"updatedAt"`
	Embedding    *Vector    `json:"embedding,omitempty"`
}

// Supersession is a recorded supersession edge.
type Supersession struct {
	Kind      string    `json:"kind"` // "supersession"
	OldID     uuid.UUID `json:"oldId"`
	NewID     uuid.UUID `json:"newId"`
	AgentID   uuid.UUID `json:"agentId"`
	CreatedAt time.Time `json:"createdAt"`
}

// TaskLink links an entry to a task.
type TaskLink struct {
	Kind          string     `json:"kind"` // "taskLink"
	TaskID        uuid.UUID  `json:"taskId"`
	EntryID       uuid.UUID  `json:"entryId"`
	LinkKind      string     `json:"linkKind"`
	AuthorAgentID *uuid.UUID `json:"authorAgentId"`
	CreatedAt     time.Time  `json:"createdAt"`
}

// RelationType is an org's own relation type (ctl relation-type add).
type RelationType struct {
	Kind    string `json:"kind"` // "relationType"
	Name    string `json:"name"`
	Inverse string `json:"inverse"`
}

// Relation is one relation, open or closed (its history), as stored:
// type is the catalogue name, fromId and toId in stored order.
type Relation struct {
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

// Document marks an entry as a document (store_document): where it came
// from, how it was split, the hashes a replacement compares, and whether
// it is its source's live version. A file without these lines (an older
// export) imports its entries as plain entries.
type Document struct {
	Kind        string    `json:"kind"` // "document"
	ID          uuid.UUID `json:"id"`   // the document's entry
	Source      *string   `json:"source"`
	Format      string    `json:"format"`
	Sections    int32     `json:"sections"`
	Chars       int64     `json:"chars"`
	ContentHash []byte    `json:"contentHash"`
	EntryHash   []byte    `json:"entryHash"`
	Live        bool      `json:"live"`
	CreatedAt   time.Time `json:"createdAt"`
}

// Section is a section entry's place in its document: the position, the
// heading path, the content hash a replacement compares, and when and how
// a replacement ended it ("changed" or "retired"; null while current).
type Section struct {
	Kind        string     `json:"kind"` // "section"
	ID          uuid.UUID  `json:"id"`   // the section's entry
	DocumentID  uuid.UUID  `json:"documentId"`
	Position    int32      `json:"position"`
	HeadingPath []string   `json:"headingPath"`
	ContentHash []byte     `json:"contentHash"`
	EndedAt     *time.Time `json:"endedAt"`
	EndedHow    *string    `json:"endedHow"`
}

// ErrNewerFormat is returned for a file of a format version this code does
// not know.
var ErrNewerFormat = errors.New("the file is of a newer format version")

// CheckHeader refuses a file whose first line is not the header of an
// export of a version this code reads.
func CheckHeader(kind, format string, version int) error {
	if kind != KindHeader || format != Format {
		return errs.InvalidArgument("file", "line 1 is not the header of a %s export", Format)
	}
	if version > Version {
		return fmt.Errorf("%w: version %d, this program reads up to %d (use a newer ctl)", ErrNewerFormat, version, Version)
	}
	return nil
}
