package blob

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestValidateKey(t *testing.T) {
	tests := []struct {
		name string
		key  string
		ok   bool
	}{
		{name: "single segment", key: "report.csv", ok: true},
		{name: "nested", key: "tenants/t_1/exports/2026-01-02_segment-7.csv.gz", ok: true},
		{name: "all allowed characters", key: "AZaz09._-/x", ok: true},
		{name: "three dots is a name", key: "a/.../b", ok: true},
		{name: "dot prefix is a name", key: ".hidden", ok: true},
		{name: "max length", key: strings.Repeat("a", MaxKeyLen), ok: true},
		{name: "too long", key: strings.Repeat("a", MaxKeyLen+1)},
		{name: "empty", key: ""},
		{name: "parent", key: ".."},
		{name: "dot", key: "."},
		{name: "parent prefix", key: "../x"},
		{name: "parent in middle", key: "a/../../x"},
		{name: "parent at end", key: "a/.."},
		{name: "dot segment", key: "a/./b"},
		{name: "absolute", key: "/etc/passwd"},
		{name: "trailing slash", key: "a/"},
		{name: "double slash", key: "a//b"},
		{name: "backslash traversal", key: `..\x`},
		{name: "windows absolute", key: `C:\x`},
		{name: "space", key: "a b"},
		{name: "percent escape", key: "a%2F..%2Fb"},
		{name: "query", key: "a?b"},
		{name: "nul", key: "a\x00b"},
		{name: "non ascii", key: "café"},
		{name: "tilde home", key: "~/x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateKey(tt.key)
			if tt.ok && err != nil {
				t.Fatalf("ValidateKey(%q) = %v, want nil", tt.key, err)
			}
			if !tt.ok && !errors.Is(err, ErrInvalidKey) {
				t.Fatalf("ValidateKey(%q) = %v, want ErrInvalidKey", tt.key, err)
			}
		})
	}
}

func TestCheckTTL(t *testing.T) {
	tests := []struct {
		name string
		ttl  time.Duration
		ok   bool
	}{
		{name: "one second", ttl: time.Second, ok: true},
		{name: "seven days", ttl: MaxSignedURLTTL, ok: true},
		{name: "zero", ttl: 0},
		{name: "negative", ttl: -time.Minute},
		{name: "over seven days", ttl: MaxSignedURLTTL + time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkTTL(tt.ttl)
			if tt.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalidTTL)) {
				t.Fatalf("checkTTL(%s) = %v, want ok=%v", tt.ttl, err, tt.ok)
			}
		})
	}
}
