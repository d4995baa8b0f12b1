// Package ident holds the rules identifiers follow wherever they come in: a user id accepted by
// ingestion can be looked up by the API, and one ingestion refuses is refused there too; a name
// the segment language accepts is one the loader keeps statistics for. It imports nothing of
// Cohort's, so any package can use it.
package ident

import (
	"errors"
	"unicode"
	"unicode/utf8"
)

// MaxUserIDLen is the longest user id, in characters.
const MaxUserIDLen = 255

// MaxNameLen is the longest event type, property or trait name the segment language can name, in
// bytes. The loader keeps per-user property rollups only for names within it.
const MaxNameLen = 128

// Why a user id is refused; each message reads after the field name ("user_id is required").
var (
	ErrUserIDEmpty   = errors.New("is required")
	ErrUserIDUTF8    = errors.New("must be valid UTF-8")
	ErrUserIDTooLong = errors.New("must be at most 255 characters")
	ErrUserIDControl = errors.New("must not contain control characters")
)

// CheckUserID returns nil when s can be a user id: 1 to MaxUserIDLen characters of valid UTF-8
// without control characters (Unicode category Cc: C0, DEL and C1).
func CheckUserID(s string) error {
	if s == "" {
		return ErrUserIDEmpty
	}
	if !utf8.ValidString(s) {
		return ErrUserIDUTF8
	}
	if utf8.RuneCountInString(s) > MaxUserIDLen {
		return ErrUserIDTooLong
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return ErrUserIDControl
		}
	}
	return nil
}
