package documents

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/errs"
	"github.com/agentfleet/orchestrator/packages/knowledge/domain"
	"github.com/agentfleet/orchestrator/packages/knowledge/entries"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/data"
	"github.com/agentfleet/orchestrator/packages/knowledge/internal/docsplit"
)

// Limits of documents (store_document, uploads in parts).
const (
	// MaxDocumentBytes is the most content one store_document call takes
	// (UTF-8 bytes); larger documents go in parts.
	MaxDocumentBytes = 1 << 20
	// MaxUploadBytes is the most content a document uploaded in parts may
	// have.
	MaxUploadBytes = 10 << 20
	// MaxSectionChars is the longest section (runes): the entry body
	// limit, so every section is an entry as store_knowledge makes them.
	MaxSectionChars = domain.MaxBodyChars
	// MaxDocumentSections bounds the sections of one document. Each is
	// PART_OF the document, so a document's own relations never pass the
	// per-entry relation cap.
	MaxDocumentSections = domain.MaxRelationsPerEntry
	// DefaultDocumentKind is a document's kind (and its sections') when
	// the call names none.
	DefaultDocumentKind = domain.KindReference
)

// Document formats (DocumentInput.Format). HTML is turned into Markdown
// first (docsplit.FromHTML), so it is cut at its headings; the sections
// hold that Markdown.
const (
	FormatMarkdown = "markdown"
	FormatText     = "text"
	FormatHTML     = "html"
)

// What a store did to each section (SectionRef.Status).
const (
	SectionNew     = "new"     // a new entry
	SectionKept    = "kept"    // the same entry as before: id and vectors kept
	SectionChanged = "changed" // a new entry superseding the section it replaces
)

// sectionTitleSep joins a document's title and a section's heading path in
// the section's title.
const sectionTitleSep = " › "

// StoreDocument stores a document for the caller (store_document): a
// document entry whose body is a table of contents, and one entry per
// section (split on Markdown headings, then paragraphs, each at most
// MaxSectionChars), each PART_OF the document, all embedded and searchable
// like any entry. With the Source of a live document of the org it
// replaces that document in one transaction: unchanged sections keep their
// entries, changed ones are superseded by their new versions, removed ones
// are retired. Quota: one unit per entry written, all checked before
// anything is written. With a ClientToken a retry is answered, not stored
// again; without one, storing the same content again changes nothing.
func (s *Documents) StoreDocument(ctx context.Context, c domain.Caller, in domain.DocumentInput) (_ *domain.DocumentResult, err error) {
	defer data.WrapOp(&err, "knowledge.StoreDocument")
	return s.storeDocument(ctx, c, in, MaxDocumentBytes)
}

// storeDocument is StoreDocument with the content limit maxBytes (the
// uploads in parts take MaxUploadBytes).
func (s *Documents) storeDocument(ctx context.Context, c domain.Caller, in domain.DocumentInput, maxBytes int) (*domain.DocumentResult, error) {
	a, err := validateDocument(c, in, maxBytes)
	if err != nil {
		return nil, err
	}
	p, err := planDocument(c.OrgID, a)
	if err != nil {
		return nil, err
	}
	if a.ClientToken != nil {
		res, err := s.replayDocument(ctx, c, a)
		if res != nil || err != nil {
			return res, err
		}
	}
	res, jobs, err := s.writeDocument(ctx, c, a, p)
	if err == entries.ErrTokenTaken {
		res, err = s.replayDocument(ctx, c, a)
		if err == nil && res == nil {
			err = &errs.Error{Code: errs.CodeConflict, Field: "clientToken", Retryable: true,
				Message: "a call with this clientToken changed meanwhile; retry"}
		}
	}
	if err != nil {
		return nil, data.MapErr(err, "")
	}
	s.enqueueAll(ctx, jobs)
	return res, nil
}

// documentArgs is DocumentInput after defaults and normalisation; its JSON
// (with the content's hash) is what a clientToken's arguments are compared
// by, and what tells the same document stored again.
type documentArgs struct {
	Title       string          `json:"title"`
	Content     string          `json:"-"`
	ContentHash []byte          `json:"contentHash"`
	Source      string          `json:"source,omitempty"`
	Tags        []string        `json:"tags"`
	Kind        string          `json:"kind"`
	Metadata    json.RawMessage `json:"metadata,omitempty"` // compact, keys sorted (normaliseMetadata)
	Format      string          `json:"format"`
	ClientToken *uuid.UUID      `json:"-"`
}

// hash is the fingerprint of the arguments (json.Marshal sorts map keys).
func (a *documentArgs) hash() []byte {
	b, _ := json.Marshal(a) // plain data: cannot fail
	h := sha256.Sum256(b)
	return h[:]
}

// validateDocument checks and normalises a store_document call. No I/O.
func validateDocument(c domain.Caller, in domain.DocumentInput, maxBytes int) (*documentArgs, error) {
	if err := domain.CheckCaller(c, true); err != nil {
		return nil, err
	}
	if err := domain.CheckText("title", in.Title, domain.MaxTitleChars); err != nil {
		return nil, err
	}
	if len(in.Content) > maxBytes {
		return nil, errs.InvalidArgument("content", "must be at most %d bytes (got %d)%s", maxBytes, len(in.Content), largerHint(maxBytes))
	}
	if err := domain.CheckText("content", in.Content, maxBytes); err != nil {
		return nil, err
	}
	a := &documentArgs{Title: in.Title, Content: in.Content, Source: in.Source, Kind: in.Kind, Format: in.Format, ClientToken: in.ClientToken}
	if err := domain.CheckSource("source", in.Source); err != nil {
		return nil, err
	}
	var err error
	if a.Tags, err = domain.NormaliseTags(in.Tags); err != nil {
		return nil, err
	}
	if a.Kind == "" {
		a.Kind = DefaultDocumentKind
	}
	if err := domain.CheckKind("kind", a.Kind); err != nil {
		return nil, err
	}
	if a.Metadata, err = domain.NormaliseMetadata("metadata", in.Metadata); err != nil {
		return nil, err
	}
	switch a.Format {
	case "":
		a.Format = FormatMarkdown
	case FormatMarkdown, FormatText, FormatHTML:
	default:
		return nil, errs.InvalidArgument("format", "must be %q, %q or %q (got %q)", FormatMarkdown, FormatText, FormatHTML, domain.ClipRunes(a.Format, 40))
	}
	h := sha256.New()
	hashString(h, in.Content)
	a.ContentHash = h.Sum(nil)
	return a, nil
}

func largerHint(maxBytes int) string {
	if maxBytes < MaxUploadBytes {
		return fmt.Sprintf("; a larger document, up to %d bytes, goes in parts (document_upload_start)", MaxUploadBytes)
	}
	return ""
}

// plannedSection is one section a document is to have.
type plannedSection struct {
	path        []string
	title, body string
	chars       int
	hash        []byte // of the whole section entry: what replacement compares
}

// documentPlan is what a document's entries are to be.
type documentPlan struct {
	toc       string // the document entry's body
	sections  []plannedSection
	chars     int64
	argsHash  []byte // documentArgs.hash: the same arguments change nothing
	entryHash []byte // of the document entry itself (title, toc, tags, kind, metadata)
}

// planDocument splits the content and makes every entry's text and hash.
func planDocument(org uuid.UUID, a *documentArgs) (*documentPlan, error) {
	text := a.Content
	if a.Format == FormatHTML {
		md, err := docsplit.FromHTML(text)
		if err != nil {
			return nil, errs.InvalidArgument("content", "is HTML that cannot be read: %v", err)
		}
		text = md
	}
	var parts []docsplit.Section
	if a.Format == FormatText {
		parts = docsplit.SplitText(text, MaxSectionChars) // no headings: cut for size alone
	} else {
		parts = docsplit.Split(text, MaxSectionChars)
	}
	// Whitespace-only parts carry nothing to search; the splitter merges
	// them into a neighbour, and any left (a blank document) are dropped.
	kept := parts[:0]
	for _, p := range parts {
		if strings.TrimSpace(p.Text) != "" {
			kept = append(kept, p)
		}
	}
	if len(kept) == 0 {
		return nil, errs.InvalidArgument("content", "has no text to store")
	}
	if len(kept) > MaxDocumentSections {
		return nil, errs.InvalidArgument("content", "splits into %d sections, more than %d (MaxDocumentSections): store it as several documents", len(kept), MaxDocumentSections)
	}
	meta := []byte(a.Metadata)
	p := &documentPlan{sections: make([]plannedSection, len(kept)), argsHash: a.hash()}
	seen := map[string]int{}
	for i, part := range kept {
		path := part.HeadingPath
		if path == nil {
			path = []string{}
		}
		key := strings.Join(path, "\x1f")
		seen[key]++
		title := sectionTitle(a.Title, path, seen[key])
		n := utf8.RuneCountInString(part.Text)
		p.sections[i] = plannedSection{path: path, title: title, body: part.Text, chars: n,
			hash: entryHash(title, part.Text, a.Tags, a.Kind, meta, a.Source)}
		p.chars += int64(n)
	}
	p.toc = tableOfContents(a.Title, p.sections)
	p.entryHash = entryHash(a.Title, p.toc, a.Tags, a.Kind, meta, a.Source)
	return p, nil
}

// entryHash is the hash of everything an entry of a document is stored
// with: an entry with the same hash is the same entry.
func entryHash(title, body string, tags []string, kind string, meta []byte, source string) []byte {
	h := sha256.New()
	for _, s := range []string{title, body, strings.Join(tags, "\x1f"), kind, string(meta), source} {
		hashString(h, s)
		h.Write([]byte{0})
	}
	return h.Sum(nil)
}

// hashString writes s to h; a long s through a small buffer, since
// h.Write([]byte(s)) copies the whole string first (10 MB for a document
// uploaded in parts).
func hashString(h hash.Hash, s string) {
	if len(s) <= hashChunk {
		h.Write([]byte(s))
		return
	}
	buf := make([]byte, hashChunk)
	for len(s) > 0 {
		n := copy(buf, s)
		h.Write(buf[:n])
		s = s[n:]
	}
}

const hashChunk = 32 << 10

// sectionTitle is "<document title> › <heading › path>", with " (part n)"
// for the n-th part of a heading path cut in several, at most
// MaxTitleChars: when longer, its start is cut (the most specific heading
// is what tells sections apart).
func sectionTitle(doc string, path []string, part int) string {
	t := doc
	if len(path) > 0 {
		t += sectionTitleSep + strings.Join(path, sectionTitleSep)
	}
	if part > 1 {
		t += " (part " + strconv.Itoa(part) + ")"
	}
	t = strings.Join(strings.Fields(t), " ") // headings hold no line breaks in a title
	if n := utf8.RuneCountInString(t); n > domain.MaxTitleChars {
		r := []rune(t)
		t = "…" + string(r[n-domain.MaxTitleChars+1:])
	}
	return t
}

// tableOfContents is a document entry's body: its title and its sections'
// heading paths in order, cut to MaxBodyChars.
func tableOfContents(title string, secs []plannedSection) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\nContents (%d sections):\n", title, len(secs))
	n := utf8.RuneCountInString(b.String())
	for i, s := range secs {
		name := strings.Join(s.path, sectionTitleSep)
		if name == "" {
			name = "(start)"
		}
		line := fmt.Sprintf("%d. %s\n", i+1, name)
		n += utf8.RuneCountInString(line)
		if n+40 > domain.MaxBodyChars {
			fmt.Fprintf(&b, "… and %d more sections\n", len(secs)-i)
			break
		}
		b.WriteString(line)
	}
	return b.String()
}
