// Package jsontext holds the one rule for the text inside a JSON body: every string must be valid
// UTF-8. encoding/json silently turns invalid UTF-8 bytes and \u escapes of unpaired surrogates
// (\ud800 alone) into U+FFFD, so what a client sent would be stored changed; the rule is checked
// on the raw body, before decoding, and the refusal names the field, as ingestion does.
package jsontext

import (
	"github.com/cohort-dev/cohort/internal/ingest/wire"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Problem is the message for a field whose text breaks the rule; ingestion uses the same words.
const Problem = "must be valid UTF-8"

// Check returns the offset in p of the first invalid UTF-8 byte or \u escape of an unpaired
// surrogate, or -1 when there is none. It is one pass over p and allocates nothing. It does not
// validate JSON syntax: a backslash can only stand inside a string in valid JSON, and the decoder
// that follows refuses anything else.
func Check(p []byte) int {
	for i := 0; i < len(p); {
		c := p[i]
		if c >= utf8.RuneSelf {
			if r, n := utf8.DecodeRune(p[i:]); r == utf8.RuneError && n == 1 {
				return i
			} else {
				i += n
			}
			continue
		}
		if c != '\\' {
			i++
			continue
		}
		if i+1 >= len(p) || p[i+1] != 'u' {
			i += 2 // an escaped character, possibly a backslash
			continue
		}
		r := hex4(p, i+2)
		switch {
		case r >= 0xD800 && r <= 0xDBFF:
			if i+7 >= len(p) || p[i+6] != '\\' || p[i+7] != 'u' {
				return i
			}
			if lo := hex4(p, i+8); lo < 0xDC00 || lo > 0xDFFF {
				return i
			}
			i += 12
		case r >= 0xDC00 && r <= 0xDFFF:
			return i
		case r < 0:
			i += 2 // not an escape encoding/json accepts; the decoder refuses it
		default:
			i += 6
		}
	}
	return -1
}

// hex4 decodes the four hex digits at p[i:], or returns -1.
func hex4(p []byte, i int) rune {
	if i+4 > len(p) {
		return -1
	}
	return Hex4(p[i : i+4])
}

// Hex4 decodes the hex digits of a \u escape (b holds the four after "\u"), or returns -1
// when one is not a hex digit.
func Hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			r |= rune(c-'A') + 10
		default:
			return -1
		}
	}
	return r
}

// PathAt returns the path of the field whose value (or key) holds byte off of the JSON text p,
// as the API names fields: "blocks[0].props.title". A string that is an object key is named by
// the object that holds it. "" when off is outside every field (or p is not JSON enough to tell).
// It is for the error path only: it walks p from the start.
func PathAt(p []byte, off int) string {
	w := walker{p: p, off: off}
	i := w.skipSpace(0)
	w.value(i, nil)
	return w.found
}

type walker struct {
	p     []byte
	off   int
	found string
	done  bool
}

func (w *walker) skipSpace(i int) int { return wire.SkipSpace(w.p, i) }

// after reads what follows an element of an object or array closed by end: the index of the next
// element and false after a comma, the index after end and true at the end, -1 otherwise.
func (w *walker) after(i int, end byte) (int, bool) {
	i = w.skipSpace(i)
	switch {
	case i >= len(w.p):
		return -1, true
	case w.p[i] == end:
		return i + 1, true
	case w.p[i] != ',':
		return -1, true
	}
	return w.skipSpace(i + 1), false
}

// hit records path when off lies in p[start:end].
func (w *walker) hit(start, end int, path []string) bool {
	if w.off >= start && w.off < end {
		w.found = strings.Join(path, "")
		w.found = strings.TrimPrefix(w.found, ".")
		w.done = true
	}
	return w.done
}

// value walks the value at p[i] and returns the index after it, or -1.
func (w *walker) value(i int, path []string) int {
	if i >= len(w.p) || w.done {
		return -1
	}
	switch w.p[i] {
	case '"':
		end := wire.SkipString(w.p, i)
		if end < 0 {
			return -1
		}
		w.hit(i, end, path)
		return end
	case '{':
		i = w.skipSpace(i + 1)
		if i < len(w.p) && w.p[i] == '}' {
			return i + 1
		}
		for i < len(w.p) {
			if w.p[i] != '"' {
				return -1
			}
			end := wire.SkipString(w.p, i)
			if end < 0 || w.hit(i, end, path) {
				return -1
			}
			key := string(w.p[i+1 : end-1])
			if strings.IndexByte(key, '\\') >= 0 {
				if k, err := strconv.Unquote(string(w.p[i:end])); err == nil {
					key = k
				}
			}
			i = w.skipSpace(end)
			if i >= len(w.p) || w.p[i] != ':' {
				return -1
			}
			i = w.value(w.skipSpace(i+1), append(path, "."+key))
			if i < 0 {
				return -1
			}
			next, closed := w.after(i, '}')
			if closed {
				return next
			}
			i = next
		}
		return -1
	case '[':
		i = w.skipSpace(i + 1)
		if i < len(w.p) && w.p[i] == ']' {
			return i + 1
		}
		for n := 0; i < len(w.p); n++ {
			i = w.value(i, append(path, "["+strconv.Itoa(n)+"]"))
			if i < 0 {
				return -1
			}
			next, closed := w.after(i, ']')
			if closed {
				return next
			}
			i = next
		}
		return -1
	}
	return wire.SkipValue(w.p, i) // a number, true, false or null
}
