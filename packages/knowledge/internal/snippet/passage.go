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
// a rule), so choosing stays a few scans of the body. A word is looked
// for at most passageMatches times: one that occurs more often is common
// in the body and tells its parts apart no better.
const (
	passageWords   = 32
	passageMatches = 64
)

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
	words := passageQueryWords(query)
	if isASCII(body) {
		// The common case, in bytes (bytes are runes here): the words are
		// found with strings.Index, a 32,000-character body in tens of
		// microseconds.
		lower := strings.ToLower(body)
		start := 0
		if at, ok := bestWindow(asciiMatches(lower, words, chars), len(words), chars); ok {
			start = at
		} else if from >= 0 && from < to && to <= len(body) {
			start = (from+to)/2 - chars/2
		}
		start = max(0, min(start, len(body)-chars))
		return body[start : start+chars]
	}
	rs := []rune(body)
	lower := make([]rune, len(rs))
	for i, r := range rs {
		lower[i] = unicode.ToLower(r)
	}
	start := 0
	if at, ok := bestWindow(runeMatches(lower, words, chars), len(words), chars); ok {
		start = at
	} else if from >= 0 && from < to && to <= len(rs) {
		start = (from+to)/2 - chars/2
	}
	start = max(0, min(start, len(rs)-chars))
	return string(rs[start : start+chars])
}

// passageQueryWords are the query's distinct words, lowercased, at least
// three characters long (shorter ones are mostly stop words), the
// passageWords longest.
func passageQueryWords(query string) []string {
	var words []string
	for _, w := range strings.FieldsFunc(strings.Map(unicode.ToLower, query), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		if utf8.RuneCountInString(w) >= 3 && !slices.Contains(words, w) {
			words = append(words, w)
		}
	}
	slices.SortStableFunc(words, func(a, b string) int { return cmp.Compare(utf8.RuneCountInString(b), utf8.RuneCountInString(a)) })
	return words[:min(len(words), passageWords)]
}

// match is one occurrence of a query word: [at, end) in the text's
// characters.
type match struct{ at, end, word int }

// asciiMatches finds the words in an ASCII text, in bytes.
func asciiMatches(text string, words []string, chars int) []match {
	var ms []match
	for wi, w := range words {
		if len(w) > chars || !isASCII(w) {
			continue // no window holds it, or no ASCII text does
		}
		for off, n := 0, 0; n < passageMatches; n++ {
			i := strings.Index(text[off:], w)
			if i < 0 {
				break
			}
			ms = append(ms, match{off + i, off + i + len(w), wi})
			off += i + len(w)
		}
	}
	return ms
}

// runeMatches finds the words in a text of runes.
func runeMatches(text []rune, words []string, chars int) []match {
	var ms []match
	for wi, ws := range words {
		w := []rune(ws)
		if len(w) > chars {
			continue
		}
		for i, n := 0, 0; i+len(w) <= len(text) && n < passageMatches; i++ {
			if text[i] == w[0] && slices.Equal(text[i:i+len(w)], w) {
				ms = append(ms, match{i, i + len(w), wi})
				i += len(w) - 1
				n++
			}
		}
	}
	return ms
}

// bestWindow finds the span holding the most distinct words (of nwords)
// that fits in chars, the shortest such span (the first, on a tie), and
// returns the start of the window of chars centred on it; false when no
// word occurs.
func bestWindow(ms []match, nwords, chars int) (int, bool) {
	if len(ms) == 0 {
		return 0, false
	}
	slices.SortFunc(ms, func(a, b match) int { return cmp.Compare(a.at, b.at) })
	// Two pointers over the matches: [l, r] is the shortest run ending at
	// r that holds as many distinct words as a run ending there can
	// within chars.
	count := make([]int, nwords)
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
