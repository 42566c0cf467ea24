package domain

import (
	"encoding/base64"
	"encoding/json"
	"strings"

	"github.com/agentfleet/orchestrator/packages/knowledge/internal/snippet"
)

// Token budgets (search_knowledge and list_knowledge's maxTokens): an
// agent whose context is the scarce resource asks for an answer of about
// that many tokens. Tokens are estimated as the bytes of the answer's JSON
// divided by BytesPerToken: about right for English prose and JSON keys
// with the common tokenizers (about 4 characters a token), and safer than
// counting characters for text in scripts of several bytes a character
// (Chinese, Japanese, Korean: about one token a character, three bytes).
// It is an estimate: a client that must stay under a hard limit leaves a
// margin.
const BytesPerToken = 4

// Bounds of maxTokens: the smallest answer worth asking for (one hit with
// a short snippet is about 150 tokens), and a bound far above any answer
// (50 hits of 240-character snippets are about 6,000).
const (
	MinMaxTokens = 100
	MaxMaxTokens = 1_000_000
)

// EstimateTokens is the estimated token count of v's JSON.
func EstimateTokens(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return 0
	}
	return (len(b) + BytesPerToken - 1) / BytesPerToken
}

// BudgetSnippets are the snippet lengths (characters) a trimmed answer
// tries, longest first: SnippetChars (as given), then shorter, then none.
var BudgetSnippets = []int{SnippetChars, 120, 60, 0}

// FitBudget trims an answer of n hits to maxTokens: it tries the snippet
// lengths of budgetSnippets with every hit, and keeps the longest that
// fits; when none does, it keeps the first hits that fit with 60-character
// snippets (none if even one does not fit with them, then no snippets),
// and always at least keep hits (so that a listing makes progress).
// setSnippet cuts every kept hit's snippet (the original is passed back in,
// so lengths never compound), keepFirst drops the hits after the first k,
// and size estimates the answer as it then is. It returns whether anything
// was cut and how many hits were dropped.
func FitBudget(maxTokens, n, keep int, setSnippet func(chars int), keepFirst func(k int), size func() int) (truncated bool, dropped int) {
	if size() <= maxTokens {
		return false, 0
	}
	for _, chars := range BudgetSnippets[1:] {
		setSnippet(chars)
		if size() <= maxTokens {
			return true, 0
		}
	}
	for _, chars := range []int{60, 0} {
		setSnippet(chars)
		for k := n - 1; k >= keep; k-- {
			keepFirst(k)
			if size() <= maxTokens {
				if k == 0 && chars > 0 {
					break // no hit fits with a snippet: try without
				}
				return true, n - k
			}
		}
		keepFirst(n)
	}
	keepFirst(keep)
	return true, n - keep
}

// FitSearch trims a search answer to about maxTokens (0: no budget):
// shorter snippets first, then the lowest-ranked hits. It sets Truncated
// and OmittedHits when it cut anything.
func FitSearch(res *SearchResult, maxTokens int) {
	if res == nil || maxTokens <= 0 || EstimateTokens(res) <= maxTokens {
		return
	}
	orig := make([]string, len(res.Hits))
	for i, h := range res.Hits {
		orig[i] = h.Snippet
	}
	all := res.Hits
	res.Truncated = true // in the estimates: the answer will carry it
	FitBudget(maxTokens, len(all), 0,
		func(chars int) {
			for i := range all {
				all[i].Snippet = snippet.Cut(orig[i], chars)
			}
		},
		func(k int) { res.Hits, res.OmittedHits = all[:k], len(all)-k },
		func() int { return EstimateTokens(res) })
}

// FitList trims a listing's page to about maxTokens, keeping at least one
// hit so that paging makes progress. When it leaves hits out, the caller
// seals the next cursor after the last hit kept (its length is counted
// here already).
func FitList(res *ListResult, maxTokens int) (dropped int) {
	if res == nil || maxTokens <= 0 || EstimateTokens(res) <= maxTokens {
		return 0
	}
	orig := make([]string, len(res.Hits))
	for i, h := range res.Hits {
		orig[i] = h.Snippet
	}
	all, next := res.Hits, res.NextCursor
	res.Truncated = true
	_, dropped = FitBudget(maxTokens, len(all), min(len(all), 1),
		func(chars int) {
			for i := range all {
				all[i].Snippet = snippet.Cut(orig[i], chars)
			}
		},
		func(k int) {
			res.Hits, res.NextCursor = all[:k], next
			if k < len(all) {
				res.NextCursor = CursorPlaceholder
			}
		},
		func() int { return EstimateTokens(res) })
	res.NextCursor = next
	return dropped
}

// CursorPlaceholder has the length of every cursor (sealCursor), for the
// estimate of a page whose cursor is sealed after the trim.
var CursorPlaceholder = strings.Repeat("c", base64.RawURLEncoding.EncodedLen(CursorPayload+16))
