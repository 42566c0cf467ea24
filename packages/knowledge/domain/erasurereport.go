package domain

import (
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/agentfleet/orchestrator/packages/errs"
)

// Limits of an erasure report (ctl erasure-report).
const (
	// MinErasureTextChars and MaxErasureTextChars bound the text a report
	// scans for: shorter text is in too many places to prove anything,
	// longer is not one copy but a document (give a fragment of it).
	MinErasureTextChars = 4
	MaxErasureTextChars = 1000
	// DefaultErasureReportTimeout bounds a report that sets none;
	// MaxErasureReportTimeout bounds any.
	DefaultErasureReportTimeout = 2 * time.Minute
	MaxErasureReportTimeout     = time.Hour
	// MaxErasureRows is how many rows of one table a report lists; past
	// it the table is named in MoreRows.
	MaxErasureRows = 20
)

// The kinds of what a report scans for (ErasureNeedle.Kind).
const (
	NeedleText  = "text"  // the operator's text
	NeedleID    = "id"    // the entry's id
	NeedleTitle = "title" // the entry's title
	NeedleBody  = "body"  // a fragment of the entry's body
	NeedleWord  = "word"  // a word of the entry no other entry of the org holds
)

// ErasureReportInput says what an erasure report scans for: exactly one
// of Text and Entry.
type ErasureReportInput struct {
	// Text is scanned for as given, case-insensitively.
	Text string
	// Entry: its id and, while the entry is stored in the org, its title,
	// fragments of its body and the words of it no other entry of the org
	// holds. An entry not stored in the org (erased, never stored, or of
	// another org) is scanned for by its id alone.
	Entry uuid.UUID
	// Timeout bounds the scan (0: DefaultErasureReportTimeout): past it the
	// report is answered as far as it got, Complete false.
	Timeout time.Duration
}

// Validate is the rule of a report's input: exactly one of Text and
// Entry, the text's length, the timeout's range. The report checks it; ctl
// calls it first to refuse a command line before connecting.
func (in ErasureReportInput) Validate() error {
	if (in.Text != "") == (in.Entry != uuid.Nil) {
		return errs.InvalidArgument("text", "give exactly one of text and entry")
	}
	if in.Text != "" {
		if !utf8.ValidString(in.Text) || strings.ContainsRune(in.Text, 0) {
			return errs.InvalidArgument("text", "must be valid UTF-8 text without NUL bytes")
		}
		n := utf8.RuneCountInString(strings.TrimSpace(in.Text))
		if n < MinErasureTextChars || utf8.RuneCountInString(in.Text) > MaxErasureTextChars {
			return errs.InvalidArgument("text", "must be %d to %d characters, spaces around it not counted (got %d): shorter text is in too many places to prove anything",
				MinErasureTextChars, MaxErasureTextChars, n)
		}
	}
	if in.Timeout < 0 || in.Timeout > MaxErasureReportTimeout {
		return errs.InvalidArgument("timeout", "must be from 0 (the default, %s) to %s (got %s)", DefaultErasureReportTimeout, MaxErasureReportTimeout, in.Timeout)
	}
	return nil
}

// ErasureNeedle is one thing a report scans for.
type ErasureNeedle struct {
	Kind string `json:"kind"`
	Text string `json:"text"`
}

// ErasureTrace is one place a report found a needle: a column of a row
// (Table, Column, Row: the row's primary key), or a Redis key (RedisKey,
// RedisType; the key's name or its value).
type ErasureTrace struct {
	Table     string `json:"table,omitempty"`
	Column    string `json:"column,omitempty"`
	Row       string `json:"row,omitempty"`
	RedisKey  string `json:"redisKey,omitempty"`
	RedisType string `json:"redisType,omitempty"`
	// Found lists the kinds of the needles found there (NeedleText, ...).
	Found []string `json:"found"`
	// Kept says why the erasure keeps this place by design (Kept traces
	// only: an erased entry's id in its tombstone, the audit trail, a
	// queued task).
	Kept string `json:"kept,omitempty"`
}

// ErasureReport answers an erasure report: where the needles are still
// found. Copies empty and Complete true: nothing is left.
type ErasureReport struct {
	OrgID uuid.UUID  `json:"orgId"`
	Text  string     `json:"text,omitempty"`
	Entry *uuid.UUID `json:"entry,omitempty"`
	// EntryStored: the entry is stored in the org, so its title, body
	// fragments and words were scanned for too, not its id alone.
	EntryStored bool            `json:"entryStored"`
	Needles     []ErasureNeedle `json:"needles"`
	// Copies are the places that hold a needle; Kept those holding an
	// erased entry's id where erasure keeps it by design.
	Copies []ErasureTrace `json:"copies"`
	Kept   []ErasureTrace `json:"kept"`
	// What was scanned: tables and their columns, Redis keys.
	Tables    int `json:"tables"`
	Columns   int `json:"columns"`
	RedisKeys int `json:"redisKeys"`
	// MoreRows names the tables with more rows holding a needle than the
	// MaxErasureRows listed.
	MoreRows []string `json:"moreRows,omitempty"`
	// NotScanned names what the scan did not reach (the deadline, a table
	// the role may not read, no Redis), each with why.
	NotScanned []string `json:"notScanned,omitempty"`
	// Complete: every table and every product key of Redis was scanned.
	Complete bool          `json:"complete"`
	Elapsed  time.Duration `json:"-"`
	// ElapsedMs is Elapsed in milliseconds, for --json.
	ElapsedMs int64 `json:"elapsedMs"`
}

// Clean says the report proves the needles gone: nothing found, all
// scanned.
func (r *ErasureReport) Clean() bool { return r.Complete && len(r.Copies) == 0 }
