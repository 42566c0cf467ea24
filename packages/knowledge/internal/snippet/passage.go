package snippet

import (
	"cmp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// passageWords bounds the query words a passage is chosen by: a
// paragraph-long query keeps its longest words (the informative ones, as
// a rule), so choosing stays a few scans of the body.
const passageWords = 32

// Passage is the part of body a reranker reads for a hit, at most chars
// characters (runes): the whole body when it fits; else the window of
// chars centred on the shortest span holding the most distinct words of
// query; else, when the hit was found
// by a later chunk of its body ([from, to) in runes; from < 0: none),
// the window centred on that chunk; else the start. It never cuts a
// character in two and adds no ellipsis.
func Passage(body, query string, chars, from, to int) string {
	if chars <= 0 {
		return ""
	}
	if len(body) <= chars || utf8.RuneCountInString(body) <= chars {
		return body
	}
	rs := []rune(body)
	lower := make([]rune, len(rs))
	for i, r := range rs {
		lower[i] = unicode.ToLower(r)
	}
	start := -1
	if at, ok := bestWindow(lower, passageQueryWords(query), chars); ok {
		start = at
	} else if from >= 0 && from < to && to <= len(rs) {
		start = (from+to)/2 - chars/2
	}
	start = max(0, min(start, len(rs)-chars))
	return string(rs[start : start+chars])
}

// passageQueryWords are the query's distinct words, lowercased, at least
// two characters long, the passageWords longest.
func passageQueryWords(query string) [][]rune {
	var words []string
	for _, w := range strings.FieldsFunc(strings.Map(unicode.ToLower, query), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		if utf8.RuneCountInString(w) >= 2 && !slices.Contains(words, w) {
			words = append(words, w)
		}
	}
	slices.SortStableFunc(words, func(a, b string) int { return cmp.Compare(utf8.RuneCountInString(b), utf8.RuneCountInString(a)) })
	out := make([][]rune, 0, min(len(words), passageWords))
	for _, w := range words[:min(len(words), passageWords)] {
		out = append(out, []rune(w))
	}
	return out
}

// bestWindow finds the span of text holding the most distinct words that
// fits in chars runes, the shortest such span (the first, on a tie), and
// returns the start of the window of chars runes centred on it; false when
// no word occurs.
func bestWindow(text []rune, words [][]rune, chars int) (int, bool) {
	type match struct{ at, end, word int }
	var ms []match
	for wi, w := range words {
		if len(w) > chars {
			continue // no window holds it
		}
		for i := 0; i+len(w) <= len(text); i++ {
			if text[i] == w[0] && slices.Equal(text[i:i+len(w)], w) {
				ms = append(ms, match{i, i + len(w), wi})
				i += len(w) - 1
			}
		}
	}
	if len(ms) == 0 {
		return 0, false
	}
	slices.SortFunc(ms, func(a, b match) int { return cmp.Compare(a.at, b.at) })
	// Two pointers over the matches: [l, r] is the shortest run ending at
	// r that holds as many distinct words as [0, r] can within chars.
	count := make([]int, len(words))
	distinct, best, spanAt, spanEnd, l := 0, 0, 0, 0, 0
	for r := range ms {
		if count[ms[r].word] == 0 {
			distinct++
		}
		count[ms[r].word]++
		// Drop from the left what is too far, or repeated later in the run.
		for l < r && (ms[r].end-ms[l].at > chars || count[ms[l].word] > 1) {
			count[ms[l].word]--
			if count[ms[l].word] == 0 {
				distinct--
			}
			l++
		}
		if span := ms[r].end - ms[l].at; distinct > best || (distinct == best && span < spanEnd-spanAt) {
			best, spanAt, spanEnd = distinct, ms[l].at, ms[r].end
		}
	}
	return (spanAt+spanEnd)/2 - chars/2, true
}
