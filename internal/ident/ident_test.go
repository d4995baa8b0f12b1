package ident

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckUserID(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want error
	}{
		{"plain", "user-42", nil},
		{"email", "ada@example.com", nil},
		{"spaces inside", "a b", nil},
		{"unicode", "ユーザー", nil},
		{"255 characters", strings.Repeat("é", 255), nil},
		{"empty", "", ErrUserIDEmpty},
		{"invalid UTF-8", "a\xffb", ErrUserIDUTF8},
		{"256 characters", strings.Repeat("a", 256), ErrUserIDTooLong},
		{"newline", "a\nb", ErrUserIDControl},
		{"NUL", "a\x00b", ErrUserIDControl},
		{"tab", "\tab", ErrUserIDControl},
		{"DEL", "ab\x7f", ErrUserIDControl},
		{"C1 control", "a\u0085b", ErrUserIDControl},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := CheckUserID(tc.in); !errors.Is(got, tc.want) {
				t.Fatalf("CheckUserID(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}
