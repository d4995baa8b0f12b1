package catalog

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits of product values.
const (
	MaxStringLength = 1000    // string, url, image and each array element (bytes)
	MaxTextLength   = 100_000 // text (bytes)
	MaxArrayLength  = 500     // elements of an array field
)

// checkValue validates a JSON value for a field type and returns it normalised (numbers as
// float64 or int64, dates as YYYY-MM-DD or RFC 3339); the message says what is wrong.
func checkValue(typ string, v any) (any, string) {
	switch typ {
	case TypeString, TypeText, TypeURL, TypeImage, TypeDate:
		s, ok := v.(string)
		if !ok {
			return nil, "must be a string"
		}
		return checkString(typ, s)
	case TypeNumber, TypePrice:
		f, ok := number(v)
		if !ok {
			return nil, "must be a number"
		}
		if typ == TypePrice && f < 0 {
			return nil, "must not be negative"
		}
		return f, ""
	case TypeInteger:
		f, ok := number(v)
		if !ok || f != math.Trunc(f) {
			return nil, "must be a whole number"
		}
		if math.Abs(f) >= 1<<53 {
			return nil, "must be a whole number smaller than 2^53 in magnitude (larger integers lose digits in JSON)"
		}
		return int64(f), ""
	case TypeBoolean:
		b, ok := v.(bool)
		if !ok {
			return nil, "must be true or false"
		}
		return b, ""
	case TypeArray:
		list, ok := v.([]any)
		if !ok {
			return nil, "must be an array of strings"
		}
		if len(list) > MaxArrayLength {
			return nil, fmt.Sprintf("must have at most %d elements", MaxArrayLength)
		}
		out := make([]any, 0, len(list))
		for _, e := range list {
			s, ok := e.(string)
			if !ok {
				return nil, "must be an array of strings"
			}
			s = strings.TrimSpace(s)
			if len(s) > MaxStringLength || !validText(s) {
				return nil, fmt.Sprintf("elements must be text of at most %d bytes", MaxStringLength)
			}
			if s != "" {
				out = append(out, s)
			}
		}
		return out, ""
	}
	return nil, "has an unknown type " + strconv.Quote(typ)
}

func checkString(typ, s string) (any, string) {
	if typ != TypeText {
		s = strings.TrimSpace(s)
	}
	limit := MaxStringLength
	if typ == TypeText {
		limit = MaxTextLength
	}
	if len(s) > limit || !validText(s) {
		return nil, fmt.Sprintf("must be text of at most %d bytes", limit)
	}
	switch typ {
	case TypeURL, TypeImage:
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, "must be an absolute http(s) URL"
		}
	case TypeDate:
		if _, err := time.Parse(time.DateOnly, s); err == nil {
			return s, ""
		}
		if _, err := time.Parse(time.RFC3339, s); err == nil {
			return s, ""
		}
		return nil, "must be a date (YYYY-MM-DD) or an RFC 3339 timestamp"
	}
	return s, ""
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, !math.IsNaN(n) && !math.IsInf(n, 0)
	case int64:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

func validText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// convert changes a stored value to a new field type when that loses nothing, or says why not.
func convert(to string, v any) (any, bool) {
	if out, msg := checkValue(to, v); msg == "" {
		return out, true
	}
	switch to {
	case TypeString, TypeText:
		switch x := v.(type) {
		case float64:
			return checkOK(to, strconv.FormatFloat(x, 'f', -1, 64))
		case bool:
			return checkOK(to, strconv.FormatBool(x))
		case []any:
			parts := make([]string, 0, len(x))
			for _, e := range x {
				s, ok := e.(string)
				if !ok {
					return nil, false
				}
				parts = append(parts, s)
			}
			return checkOK(to, strings.Join(parts, "|"))
		}
	case TypeNumber, TypePrice, TypeInteger:
		if s, ok := v.(string); ok {
			if f, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
				return checkOK(to, f)
			}
		}
	case TypeBoolean:
		if s, ok := v.(string); ok {
			if b, err := strconv.ParseBool(strings.TrimSpace(s)); err == nil {
				return b, true
			}
		}
	case TypeArray:
		if s, ok := v.(string); ok {
			return checkOK(to, []any{s})
		}
	}
	return nil, false
}

func checkOK(typ string, v any) (any, bool) {
	out, msg := checkValue(typ, v)
	return out, msg == ""
}

// sameValue compares two normalised values as JSON.
func sameValue(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}
