package docsplit

import (
	"strings"
	"unicode"
)

// heading is a line (or, for setext, two lines) that starts a section.
type heading struct {
	start int // byte offset of its first line
	level int // 1..6
	text  string
}

// headings finds the headings of a Markdown text in order. It follows
// CommonMark where a document's structure is at stake, and stays simpler
// where being wrong costs only a missed cut:
//   - ATX: up to three spaces, 1 to 6 '#', then a space, a tab or the end
//     of the line ("#tag" is text); a closing run of '#' is not part of
//     the heading's text; a heading with no text starts no section (it
//     would name nothing in a path). A path's text has its white space
//     collapsed (label).
//   - Setext: a paragraph's line underlined by '=' (level 1) or '-'
//     (level 2). Only a one-line paragraph counts, and not one that starts
//     like a list item, a block quote or HTML: a multi-line paragraph over
//     "---" is text here, where CommonMark makes it all one heading.
//   - Lines inside fenced code blocks (``` or ~~~, closed by the same
//     character at least as many times; an unclosed fence runs to the end,
//     as in CommonMark) are never headings: a shell comment is not a
//     chapter.
//   - A front-matter block ("---" on the first line to the next "---" or
//     "...") is text: its last line over "---" is not a setext heading.
func headings(text string) []heading {
	var out []heading
	var fenceChar byte // the open fence's character, 0 when none is open
	var fenceLen int
	para := 0 // lines of the paragraph the scan is in
	var paraStart int
	var paraLine string
	for pos := frontMatterEnd(text); pos < len(text); {
		lineStart := pos
		line := text[pos:]
		if i := strings.IndexByte(line, '\n'); i >= 0 {
			line = line[:i]
			pos += i + 1
		} else {
			pos = len(text)
		}
		line = strings.TrimSuffix(line, "\r")
		if fenceChar != 0 {
			if closesFence(line, fenceChar, fenceLen) {
				fenceChar = 0
			}
			continue
		}
		if c, n, ok := opensFence(line); ok {
			fenceChar, fenceLen, para = c, n, 0
			continue
		}
		if level, t, ok := atx(line); ok {
			if t = label(t); t != "" {
				out = append(out, heading{lineStart, level, t})
			}
			para = 0
			continue
		}
		if strings.TrimSpace(line) == "" {
			para = 0
			continue
		}
		if level := setextUnderline(line); level > 0 && para == 1 && plainParagraphStart(paraLine) && label(paraLine) != "" {
			out = append(out, heading{paraStart, level, label(paraLine)})
			para = 0
			continue
		}
		if thematicBreak(line) {
			para = 0
			continue
		}
		if para == 0 {
			paraStart, paraLine = lineStart, line
		}
		para++
	}
	return out
}

// label is a heading's text as a path names it: white space of any kind
// (a tab, a lone carriage return) and control characters (a NUL, which
// PostgreSQL's text refuses; a unit separator, which a stored path may
// join its parts with) are one space, none at either end.
func label(t string) string {
	return strings.Join(strings.FieldsFunc(t, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }), " ")
}

// indent is the width of a line's leading spaces, and 4 (code) when a tab
// is among them: a tab reaches the next stop of 4 columns.
func indent(line string) int {
	n := 0
	for n < len(line) && (line[n] == ' ' || line[n] == '\t') {
		if line[n] == '\t' {
			return 4
		}
		n++
	}
	return n
}

// atx reads an ATX heading line: its level and text.
func atx(line string) (int, string, bool) {
	i := indent(line)
	if i > 3 {
		return 0, "", false
	}
	s := line[i:]
	n := 0
	for n < len(s) && s[n] == '#' {
		n++
	}
	if n == 0 || n > 6 || (n < len(s) && s[n] != ' ' && s[n] != '\t') {
		return 0, "", false
	}
	t := strings.Trim(s[n:], " \t")
	j := len(t)
	for j > 0 && t[j-1] == '#' {
		j--
	}
	switch {
	case j == 0:
		t = ""
	case t[j-1] == ' ' || t[j-1] == '\t':
		t = strings.TrimRight(t[:j], " \t")
	}
	return n, t, true
}

// opensFence reads a code fence's opening line: three or more backticks
// or tildes (a backtick fence's info string has no backtick).
func opensFence(line string) (byte, int, bool) {
	i := indent(line)
	if i > 3 || i >= len(line) || (line[i] != '`' && line[i] != '~') {
		return 0, 0, false
	}
	c, n := line[i], 0
	for i+n < len(line) && line[i+n] == c {
		n++
	}
	if n < 3 || (c == '`' && strings.IndexByte(line[i+n:], '`') >= 0) {
		return 0, 0, false
	}
	return c, n, true
}

// closesFence reports whether line closes a fence of n times c.
func closesFence(line string, c byte, n int) bool {
	i := indent(line)
	if i > 3 {
		return false
	}
	m := 0
	for i+m < len(line) && line[i+m] == c {
		m++
	}
	return m >= n && strings.Trim(line[i+m:], " \t") == ""
}

// setextUnderline is 1 for a line of '=', 2 for a line of '-' (up to three
// spaces before, white space after), else 0.
func setextUnderline(line string) int {
	if indent(line) > 3 {
		return 0
	}
	s := strings.TrimRight(strings.TrimLeft(line, " "), " \t")
	if s == "" || strings.Trim(s, string(s[0])) != "" {
		return 0
	}
	switch s[0] {
	case '=':
		return 1
	case '-':
		return 2
	}
	return 0
}

// plainParagraphStart reports whether a line starts an ordinary paragraph
// (a setext heading's text), not code, a list item, a block quote or HTML.
func plainParagraphStart(line string) bool {
	if indent(line) > 3 {
		return false
	}
	s := strings.TrimLeft(line, " ")
	if thematicBreak(s) {
		return false
	}
	switch s[0] {
	case '>', '<':
		return false
	case '-', '*', '+':
		return len(s) > 1 && s[1] != ' ' && s[1] != '\t'
	}
	d := 0
	for d < len(s) && d < 10 && s[d] >= '0' && s[d] <= '9' {
		d++
	}
	if d > 0 && d < len(s) && (s[d] == '.' || s[d] == ')') {
		return d+1 < len(s) && s[d+1] != ' ' && s[d+1] != '\t'
	}
	return true
}

// thematicBreak reports whether a line is a rule: three or more '-', '*'
// or '_' (one of them), spaces and tabs between.
func thematicBreak(line string) bool {
	if indent(line) > 3 {
		return false
	}
	s := strings.Trim(line, " \t")
	if s == "" || !strings.ContainsRune("-*_", rune(s[0])) {
		return false
	}
	n := 0
	for _, r := range s {
		switch {
		case r == rune(s[0]):
			n++
		case r != ' ' && r != '\t':
			return false
		}
	}
	return n >= 3
}

// frontMatterEnd is the offset after a leading front-matter block (YAML
// between "---" lines, as static site generators write it), else 0.
func frontMatterEnd(text string) int {
	first, rest, ok := strings.Cut(text, "\n")
	if !ok || strings.TrimRight(first, " \t\r") != "---" {
		return 0
	}
	pos := len(first) + 1
	for rest != "" {
		line, after, found := strings.Cut(rest, "\n")
		pos += len(line)
		if found {
			pos++
		}
		if l := strings.TrimRight(line, " \t\r"); l == "---" || l == "..." {
			return pos
		}
		rest = after
	}
	return 0
}
