package export

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/cohort-dev/cohort/internal/jsonenc"
)

// valueKind says what a trait's text is.
type valueKind uint8

const (
	kindNull   valueKind = iota // missing or nil: null / empty cell
	kindString                  // a string, written as it is
	kindNumber                  // a JSON number: never formula-quoted in CSV
	kindOther                   // a boolean, object or array in JSON
)

// encoder renders trait values. It keeps scratch buffers, so each Writer has its own.
type encoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

func newEncoder() *encoder {
	e := &encoder{}
	e.enc = json.NewEncoder(&e.buf)
	e.enc.SetEscapeHTML(false)
	return e
}

// appendText appends the text form of v to dst: a string as it is (invalid UTF-8 replaced),
// anything else as JSON writes it. Nothing is appended for kindNull.
func (e *encoder) appendText(dst []byte, v any) ([]byte, valueKind, error) {
	switch x := v.(type) {
	case nil:
		return dst, kindNull, nil
	case string:
		return appendValidUTF8(dst, x), kindString, nil
	}
	return e.appendJSON(dst, v)
}

// appendJSON appends v encoded as JSON (a string quoted) to dst. Nothing is appended for
// kindNull: a nil, or a NaN or infinite float, which JSON cannot represent.
func (e *encoder) appendJSON(dst []byte, v any) ([]byte, valueKind, error) {
	switch x := v.(type) {
	case nil:
		return dst, kindNull, nil
	case string:
		return jsonenc.AppendString(dst, x), kindString, nil
	case bool:
		return strconv.AppendBool(dst, x), kindOther, nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return dst, kindNull, nil
		}
		return appendJSONFloat(dst, x), kindNumber, nil
	case int:
		return strconv.AppendInt(dst, int64(x), 10), kindNumber, nil
	case int64:
		return strconv.AppendInt(dst, x, 10), kindNumber, nil
	case float32:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return dst, kindNull, nil
		}
	}
	// Everything else (json.Number, other numbers, maps, slices, json.RawMessage...) goes
	// through encoding/json, which also validates json.Number and replaces invalid UTF-8.
	e.buf.Reset()
	if err := e.enc.Encode(v); err != nil {
		return dst, kindNull, fmt.Errorf("encode %T: %w", v, err)
	}
	b := bytes.TrimSuffix(e.buf.Bytes(), []byte{'\n'})
	kind := kindOther
	switch {
	case len(b) == 0 || string(b) == "null":
		return dst, kindNull, nil
	case b[0] == '"':
		kind = kindString
	case b[0] == '-' || b[0] >= '0' && b[0] <= '9':
		kind = kindNumber
	}
	return append(dst, b...), kind, nil
}

// appendJSONFloat formats f as encoding/json does: the shortest exact decimal, in exponent
// form only below 1e-6 or from 1e21 on.
func appendJSONFloat(dst []byte, f float64) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// 1e-07 -> 1e-7, as encoding/json writes it.
		if n := len(dst); n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

// appendValidUTF8 appends s with every invalid UTF-8 byte replaced by U+FFFD.
func appendValidUTF8(dst []byte, s string) []byte {
	if utf8.ValidString(s) {
		return append(dst, s...)
	}
	start := 0
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = utf8.AppendRune(dst, utf8.RuneError)
			i++
			start = i
			continue
		}
		i += size
	}
	return append(dst, s[start:]...)
}

// validUTF8 is s with every invalid UTF-8 byte replaced by U+FFFD.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return string(appendValidUTF8(nil, s))
}
