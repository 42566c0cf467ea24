package jobs

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/google/uuid"
)

// BatchResult is what a batch task records as its asynq result: how its jobs
// ended. The dashboard shows it for completed batches (through
// FormatResult), so an operator sees what a batch did without reading logs.
type BatchResult struct {
	Ready  int `json:"ready"`            // vectors written
	Failed int `json:"failed,omitempty"` // entries marked failed (refused by the provider)
	Stale  int `json:"stale,omitempty"`  // jobs with nothing to do: entry gone, done, or re-requested meanwhile
	// Similar counts the duplicate checks finished after embedding (the
	// checks by meaning stores left to the worker).
	Similar int `json:"similar,omitempty"`
}

// FormatPayload summarises a task payload on one line for the dashboard
// (asynqmon's PayloadFormatter). A batch holds up to 32 jobs: its raw JSON
// is hundreds of pixels tall and hides the row's other columns, so it is
// shown as its size, org(s), generation range and first entry ids instead.
// Unknown types and undecodable payloads fall back to a clipped raw form.
func FormatPayload(taskType string, payload []byte) string {
	return FormatPayloadNamed(taskType, payload, nil)
}

// FormatPayloadNamed is FormatPayload with each org's name before its id
// ("org Acme (c307b184-…)"), so an operator sees whose task it is without
// looking the id up. orgName returns "" for an org it cannot name (the
// id alone is shown); nil names none.
func FormatPayloadNamed(taskType string, payload []byte, orgName func(uuid.UUID) string) string {
	org := func(id uuid.UUID) string {
		if orgName != nil {
			if n := orgName(id); n != "" {
				return n + " (" + id.String() + ")"
			}
		}
		return id.String()
	}
	switch taskType {
	case TypeEmbedEntry:
		var j EntryPayload
		if json.Unmarshal(payload, &j) == nil {
			return fmt.Sprintf("entry %s · gen %d · org %s", j.EntryID, j.Generation, org(j.OrgID))
		}
	case TypeEmbedBatch:
		var p BatchPayload
		if json.Unmarshal(payload, &p) == nil {
			return summariseBatch(p, org)
		}
	}
	return clipRaw(payload)
}

func summariseBatch(p BatchPayload, org func(uuid.UUID) string) string {
	if len(p.Jobs) == 0 {
		return "batch of 0 entries"
	}
	orgs := map[uuid.UUID]bool{}
	minGen, maxGen := p.Jobs[0].Generation, p.Jobs[0].Generation
	for _, j := range p.Jobs {
		orgs[j.OrgID] = true
		minGen, maxGen = min(minGen, j.Generation), max(maxGen, j.Generation)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "batch of %d entr%s · org ", len(p.Jobs), plural(len(p.Jobs), "y", "ies"))
	if len(orgs) == 1 {
		b.WriteString(org(p.Jobs[0].OrgID))
	} else {
		ids := make([]uuid.UUID, 0, len(orgs))
		for o := range orgs {
			ids = append(ids, o)
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i].String() < ids[j].String() })
		fmt.Fprintf(&b, "%s (+%d more)", org(ids[0]), len(ids)-1)
	}
	if minGen == maxGen {
		fmt.Fprintf(&b, " · gen %d", minGen)
	} else {
		fmt.Fprintf(&b, " · gen %d-%d", minGen, maxGen)
	}
	const show = 2
	ids := make([]string, 0, show)
	for _, j := range p.Jobs[:min(show, len(p.Jobs))] {
		ids = append(ids, j.EntryID.String())
	}
	b.WriteString(" · " + strings.Join(ids, ", "))
	if len(p.Jobs) > show {
		fmt.Fprintf(&b, " (+%d)", len(p.Jobs)-show)
	}
	return b.String()
}

// FormatResult summarises a task result for the dashboard (asynqmon's
// ResultFormatter). Tasks that wrote no result (entry tasks, batches
// completed before results were recorded) say so instead of asynqmon's
// "non-printable bytes".
func FormatResult(taskType string, result []byte) string {
	if len(result) == 0 {
		return "no result recorded"
	}
	if taskType == TypeEmbedBatch {
		var r BatchResult
		if json.Unmarshal(result, &r) == nil {
			s := fmt.Sprintf("%d ready", r.Ready)
			if r.Failed > 0 {
				s += fmt.Sprintf(", %d failed", r.Failed)
			}
			if r.Stale > 0 {
				s += fmt.Sprintf(", %d stale (nothing to do)", r.Stale)
			}
			if r.Similar > 0 {
				s += fmt.Sprintf(", %d duplicate check%s done", r.Similar, plural(r.Similar, "", "s"))
			}
			return s
		}
	}
	return clipRaw(result)
}

// clipRaw shows at most 120 bytes of printable JSON (or says it is binary).
func clipRaw(b []byte) string {
	const n = 120
	s := string(b)
	for _, r := range s {
		if r == '\uFFFD' || (r < 0x20 && r != '\t') {
			return fmt.Sprintf("%d bytes (binary)", len(b))
		}
	}
	if len(s) > n {
		cut := n
		for cut > 0 && !isRuneStart(s[cut]) {
			cut--
		}
		return s[:cut] + "…"
	}
	return s
}

func isRuneStart(c byte) bool { return c&0xC0 != 0x80 }

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
