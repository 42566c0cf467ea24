// Package docsplit cuts a document (Markdown or plain text) into the
// sections a document entry is made of: one per heading, each cut again at
// the best boundary it has when it is longer than an entry may be. It
// knows text, not entries: no database, no settings, no limits of its own.
//
// The rule every caller may rely on: the sections' texts, joined in order,
// are the input exactly (not a byte lost, added or moved), so a document
// can be put back together from its sections and a section's Start is
// where its text sits in the input.
package docsplit

import (
	"strings"
	"unicode/utf8"
)

// Section is one part of a document: its text (a heading line and what
// follows it up to the next heading, or a piece of that), the texts of the
// headings it sits under, outermost first (empty for text before the first
// heading), and the byte offset of Text in the input.
type Section struct {
	HeadingPath []string
	Text        string
	Start       int
}

// Split cuts text into sections at Markdown ATX headings (# .. ######) and
// setext headings (a one-line paragraph underlined with = or -), ignoring
// lines inside fenced code blocks and a leading front-matter block (plain
// text: SplitText). A section of more than maxChars runes
// is cut into pieces of at most maxChars (see cut for where), each with
// its section's heading path. maxChars < 1 means no limit.
//
// Sections are never empty and their Starts increase. A section of white
// space alone is merged into a neighbour when one has room for it; it is
// left on its own only when neither has (a run of blank lines longer than
// maxChars, or an input of nothing but white space). An empty text has no
// sections.
func Split(text string, maxChars int) []Section {
	if text == "" {
		return nil
	}
	hs := headings(text)
	var out []Section
	emit := func(start, end int, path []string) { out = appendPieces(out, text, start, end, path, maxChars) }
	first := len(text)
	if len(hs) > 0 {
		first = hs[0].start
	}
	if first > 0 {
		emit(0, first, nil)
	}
	var stack []heading
	for i, h := range hs {
		for len(stack) > 0 && stack[len(stack)-1].level >= h.level {
			stack = stack[:len(stack)-1]
		}
		stack = append(stack, h)
		path := make([]string, len(stack))
		for j, s := range stack {
			path[j] = s.text
		}
		end := len(text)
		if i+1 < len(hs) {
			end = hs[i+1].start
		}
		emit(h.start, end, path)
	}
	return mergeBlank(out, maxChars)
}

// SplitText cuts a plain text: Split without headings (a line starting
// with '#' is text), so every section has an empty heading path and is cut
// only for size, at the same boundaries.
func SplitText(text string, maxChars int) []Section {
	if text == "" {
		return nil
	}
	return mergeBlank(appendPieces(nil, text, 0, len(text), nil, maxChars), maxChars)
}

// appendPieces appends text[start:end] to out as sections of path, cut to
// maxChars.
func appendPieces(out []Section, text string, start, end int, path []string, maxChars int) []Section {
	for _, p := range cut(text[start:end], maxChars) {
		out = append(out, Section{
			HeadingPath: append([]string{}, path...),
			Text:        text[start+p.start : start+p.end],
			Start:       start + p.start,
		})
	}
	return out
}

// mergeBlank folds each section of white space alone into the section
// before it when the two fit in maxChars, else into the one after it when
// they fit, so no blank section is dropped (the text stays whole) and none
// is kept when a neighbour could hold it. A section that only grew by
// white space keeps its heading path.
func mergeBlank(in []Section, maxChars int) []Section {
	fits := func(a, b Section) bool {
		return maxChars < 1 || utf8.RuneCountInString(a.Text)+utf8.RuneCountInString(b.Text) <= maxChars
	}
	out := make([]Section, 0, len(in))
	var pending *Section // a blank section the previous one had no room for
	for _, s := range in {
		if pending != nil {
			if fits(*pending, s) {
				s.Text, s.Start = pending.Text+s.Text, pending.Start
			} else {
				out = append(out, *pending)
			}
			pending = nil
		}
		if strings.TrimSpace(s.Text) != "" {
			out = append(out, s)
			continue
		}
		if n := len(out); n > 0 && fits(out[n-1], s) {
			out[n-1].Text += s.Text
			continue
		}
		pending = &s
	}
	if pending != nil {
		out = append(out, *pending)
	}
	return out
}
