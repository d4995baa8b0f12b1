package draft

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ErrNoJSON means the model's answer held no parseable JSON object.
var ErrNoJSON = errors.New("no json object found in the answer")

// maxObjectStarts bounds how many '{' positions Extract tries as the start of an object, so a
// long answer full of stray braces cannot make it quadratic.
const maxObjectStarts = 64

// Extract pulls the definition object out of model output: the whole content if it is a JSON
// object, else the first ```json fenced block holding one (then any fenced block), else the first
// balanced {...} object that parses. It returns compact JSON. When the object has a top-level
// "definition" key holding an object, that inner object is returned. ErrNoJSON when nothing parses.
func Extract(content string) (json.RawMessage, error) {
	s := strings.TrimSpace(strings.TrimPrefix(content, "\ufeff"))
	if s == "" {
		return nil, fmt.Errorf("%w: the answer is empty", ErrNoJSON)
	}
	if obj, ok := asObject(s); ok {
		return unwrapDefinition(obj), nil
	}
	blocks := fencedBlocks(s)
	for _, jsonOnly := range []bool{true, false} {
		for _, b := range blocks {
			if jsonOnly && !strings.EqualFold(b.lang, "json") {
				continue
			}
			if obj, ok := asObject(b.body); ok {
				return unwrapDefinition(obj), nil
			}
		}
	}
	if obj, ok := firstObject(s); ok {
		return unwrapDefinition(obj), nil
	}
	return nil, fmt.Errorf("%w: the answer starts with %q", ErrNoJSON, truncate(oneLine(s), 60))
}

// asObject returns s compacted when it is exactly one JSON object (surrounding space allowed).
func asObject(s string) (json.RawMessage, bool) {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "{") || !json.Valid([]byte(s)) {
		return nil, false
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(s)); err != nil {
		return nil, false
	}
	return buf.Bytes(), true
}

// unwrapDefinition returns obj["definition"] when that is an object, else obj.
func unwrapDefinition(obj json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(obj, &m); err != nil {
		return obj
	}
	if inner, ok := m["definition"]; ok {
		if def, ok := asObject(string(inner)); ok {
			return def
		}
	}
	return obj
}

type fence struct{ lang, body string }

// fencedBlocks lists the markdown code fences of s in order. An unterminated last fence (an answer
// cut off mid-block) runs to the end of s.
func fencedBlocks(s string) []fence {
	var out []fence
	for {
		i := strings.Index(s, "```")
		if i < 0 {
			return out
		}
		rest := s[i+3:]
		var f fence
		if nl := strings.IndexByte(rest, '\n'); nl >= 0 && !strings.ContainsAny(rest[:nl], "{}[\"") {
			f.lang = strings.TrimSpace(rest[:nl])
			rest = rest[nl+1:]
		}
		end := strings.Index(rest, "```")
		if end < 0 {
			f.body = rest
			return append(out, f)
		}
		f.body = rest[:end]
		out = append(out, f)
		s = rest[end+3:]
	}
}

// firstObject returns the first balanced {...} span of s that parses as a JSON object. Braces
// inside JSON strings do not count.
func firstObject(s string) (json.RawMessage, bool) {
	starts := 0
	for i := 0; i < len(s); i++ {
		if s[i] != '{' {
			continue
		}
		if starts++; starts > maxObjectStarts {
			break
		}
		end := matchingBrace(s, i)
		if end < 0 {
			continue
		}
		if obj, ok := asObject(s[i : end+1]); ok {
			return obj, true
		}
	}
	return nil, false
}

// matchingBrace returns the index of the '}' closing the '{' at s[start], or -1.
func matchingBrace(s string, start int) int {
	depth := 0
	inString, escaped := false, false
	for j := start; j < len(s); j++ {
		c := s[j]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return j
			}
		}
	}
	return -1
}
