package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
)

// This file makes asynqmon's pages readable for this product's tasks:
// whole task ids, payloads that wrap instead of scrolling in a 400-pixel
// box, and queue counts that leave out the completed tasks asynq keeps for
// a while (its "size" counts them, so an idle queue looked busy).
// asynqmon has no option for any of these; its compiled page is patched
// where it shortens ids and names its counts, and its queue answers are
// rewritten. The patches name asynqmon's v0.7.2 bundle: TestUIPatchesApply
// fails when an upgrade moves them, and the dashboard then serves the page
// without the patch that found nothing (and logs which) rather than
// refusing to start.

// uiPatch is one change to asynqmon's main script.
type uiPatch struct {
	what string
	re   *regexp.Regexp
	with string
}

var uiPatches = []uiPatch{
	{"whole task ids", // utils.ts uuidPrefix: the id up to its first "-"
		regexp.MustCompile(`function (\w+)\(e\)\{var t=e\.indexOf\("-"\);return-1===t\?e:e\.substr\(0,t\)\}`),
		`function $1(e){return e}`},
	{"the queues table's count", // QueuesOverviewTable.tsx's "Size" column
		regexp.MustCompile(`\{label:"Size",key:"size"`),
		`{label:"Not completed",key:"size"`},
	{"the queue banner's count", // QueueInfoBanner.tsx's "Queue size"
		regexp.MustCompile(`children:"Queue size"`),
		`children:"Not completed"`},
}

// readableCSS lets the payload column wrap (asynqmon's syntax highlighter
// is a 400-pixel box that scrolls sideways, hiding the org name behind the
// scroll bar), leaves it uncoloured (it is text, not the JSON the
// highlighter colours: digits in ids came out in another colour) and
// lets whole ids break at their separators.
const readableCSS = `<style>
td pre { max-width: 36em !important; overflow-x: visible !important; }
td pre, td pre code { white-space: pre-wrap !important; overflow-wrap: anywhere !important; }
td pre code span { color: inherit !important; }
th[scope=row] { overflow-wrap: anywhere; }
</style>`

var mainScript = regexp.MustCompile(`src="([^"]*/static/js/main\.[0-9a-f]+\.chunk\.js)"`)

// patchedUI is asynqmon's main script with uiPatches applied, and where it
// is served.
type patchedUI struct {
	path   string
	script []byte
	missed []string // the patches that found nothing to change
}

// patchUI reads asynqmon's main script (named by its index page) through
// mon and applies uiPatches.
func patchUI(mon http.Handler, index []byte) (*patchedUI, error) {
	m := mainScript.FindSubmatch(index)
	if m == nil {
		return nil, fmt.Errorf("asynqmon index names no main script")
	}
	rec := httptest.NewRecorder()
	mon.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, string(m[1]), nil))
	if rec.Code != http.StatusOK {
		return nil, fmt.Errorf("asynqmon %s: %d", m[1], rec.Code)
	}
	p := &patchedUI{path: string(m[1]), script: rec.Body.Bytes()}
	for _, u := range uiPatches {
		if !u.re.Match(p.script) {
			p.missed = append(p.missed, u.what)
			continue
		}
		p.script = u.re.ReplaceAll(p.script, []byte(u.with))
	}
	return p, nil
}

// withCSS inserts readableCSS into an index page.
func withCSS(html []byte) []byte {
	return bytes.Replace(html, []byte("</head>"), []byte(readableCSS+"</head>"), 1)
}

// queueAnswer reports whether an API path may answer queue snapshots,
// whose counts are rewritten: the list of queues, a queue, and a queue's
// task lists (each carries its queue's snapshot, which the queue's page
// shows).
func queueAnswer(path, api string) bool {
	rest, ok := strings.CutPrefix(path, api+"queues")
	return ok && (rest == "" || rest[0] == '/')
}

// notCompleted rewrites a queue answer ("queues": the list; "current": a
// queue; "stats": a task list's queue) so that each queue's "size" counts
// its tasks that are not completed: pending, active, aggregating,
// scheduled, retrying and archived (failed for good). asynq keeps a
// completed task for its retention (an hour for this product's batches) and
// counts it in the size. An answer it cannot read is returned as it was.
func notCompleted(body []byte) []byte {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return body
	}
	fix := func(raw json.RawMessage) json.RawMessage {
		var q map[string]json.RawMessage
		if json.Unmarshal(raw, &q) != nil {
			return raw
		}
		var size, completed int
		if json.Unmarshal(q["size"], &size) != nil || json.Unmarshal(q["completed"], &completed) != nil {
			return raw
		}
		q["size"], _ = json.Marshal(max(size-completed, 0))
		out, err := json.Marshal(q)
		if err != nil {
			return raw
		}
		return out
	}
	if top["queues"] == nil && top["current"] == nil && top["stats"] == nil {
		return body
	}
	if raw, ok := top["queues"]; ok {
		var qs []json.RawMessage
		if json.Unmarshal(raw, &qs) != nil {
			return body
		}
		for i := range qs {
			qs[i] = fix(qs[i])
		}
		top["queues"], _ = json.Marshal(qs)
	}
	for _, k := range []string{"current", "stats"} {
		if raw, ok := top[k]; ok {
			top[k] = fix(raw)
		}
	}
	out, err := json.Marshal(top)
	if err != nil {
		return body
	}
	return append(out, '\n')
}
