package auth_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/internal/auth"
)

var keyShape = map[auth.KeyKind]*regexp.Regexp{
	auth.KeySecret: regexp.MustCompile(`^sk_[0-9a-f]{12}_[0-9a-f]{48}$`),
	auth.KeyPublic: regexp.MustCompile(`^pk_[0-9a-f]{12}_[0-9a-f]{48}$`),
}

func TestGenerateKey(t *testing.T) {
	tests := []struct {
		name   string
		kind   auth.KeyKind
		prefix string
	}{
		{name: "secret key", kind: auth.KeySecret, prefix: "sk_"},
		{name: "public key", kind: auth.KeyPublic, prefix: "pk_"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen := map[string]bool{}
			seenIDs := map[string]bool{}
			for i := 0; i < 200; i++ {
				k, err := auth.GenerateKey(tt.kind)
				if err != nil {
					t.Fatalf("GenerateKey: %v", err)
				}
				if k.Kind != tt.kind {
					t.Fatalf("Kind = %q, want %q", k.Kind, tt.kind)
				}
				if !keyShape[tt.kind].MatchString(k.Plain) {
					t.Fatalf("Plain %q is not %s<12 hex>_<48 hex>", k.Plain, tt.prefix)
				}
				if want := k.Plain[:15]; k.KeyID != want {
					t.Fatalf("KeyID = %q, want %q (prefix + 12 hex)", k.KeyID, want)
				}
				sum := sha256.Sum256([]byte(k.Plain))
				if !bytes.Equal(k.Hash, sum[:]) {
					t.Fatalf("Hash is not SHA-256 of the plain key")
				}
				kind, id, ok := auth.ParseKey(k.Plain)
				if !ok || kind != tt.kind || id != k.KeyID {
					t.Fatalf("ParseKey(generated) = %q, %q, %v; want %q, %q, true", kind, id, ok, tt.kind, k.KeyID)
				}
				if seen[k.Plain] || seenIDs[k.KeyID] {
					t.Fatalf("GenerateKey repeated a key or key id: %q", k.Plain)
				}
				seen[k.Plain], seenIDs[k.KeyID] = true, true
			}
		})
	}
}

func TestParseKey(t *testing.T) {
	id := "0123456789ab"
	secret := strings.Repeat("cdef0123", 6) // 48 hex
	tests := []struct {
		name     string
		in       string
		wantOK   bool
		wantKind auth.KeyKind
		wantID   string
	}{
		{name: "secret key", in: "sk_" + id + "_" + secret, wantOK: true, wantKind: auth.KeySecret, wantID: "sk_" + id},
		{name: "public key", in: "pk_" + id + "_" + secret, wantOK: true, wantKind: auth.KeyPublic, wantID: "pk_" + id},
		{name: "all zeros", in: "sk_" + strings.Repeat("0", 12) + "_" + strings.Repeat("0", 48), wantOK: true, wantKind: auth.KeySecret, wantID: "sk_000000000000"},

		{name: "empty", in: ""},
		{name: "prefix only", in: "sk_"},
		{name: "prefix and id only", in: "sk_" + id},
		{name: "prefix, id and underscore only", in: "sk_" + id + "_"},
		{name: "unknown prefix", in: "xk_" + id + "_" + secret},
		{name: "stripe-like live prefix", in: "sk_live_" + secret},
		{name: "uppercase prefix", in: "SK_" + id + "_" + secret},
		{name: "prefix without underscore", in: "sk" + id + "_" + secret + "0"},
		{name: "missing underscore between id and secret", in: "sk_" + id + secret + "0"},
		{name: "dash instead of underscore", in: "sk_" + id + "-" + secret},
		{name: "uppercase hex in id", in: "sk_0123456789AB_" + secret},
		{name: "uppercase hex in secret", in: "sk_" + id + "_" + strings.ToUpper(secret)},
		{name: "non-hex letter in id", in: "sk_0123456789ag_" + secret},
		{name: "non-hex letter in secret", in: "sk_" + id + "_" + secret[:47] + "z"},
		{name: "id one char short", in: "sk_" + id[:11] + "_" + secret + "0"},
		{name: "id one char long", in: "sk_" + id + "0_" + secret[:47]},
		{name: "secret one char short", in: "sk_" + id + "_" + secret[:47]},
		{name: "secret one char long", in: "sk_" + id + "_" + secret + "0"},
		{name: "trailing newline", in: "sk_" + id + "_" + secret[:47] + "\n"},
		{name: "leading space", in: " sk_" + id + "_" + secret[:47]},
		{name: "trailing space", in: "sk_" + id + "_" + secret + " "},
		{name: "scheme included", in: "ApiKey sk_" + id + "_" + secret},
		{name: "non-ASCII", in: "sk_" + id + "_" + secret[:46] + "é"},
		{name: "a JWT", in: "eyJhbGciOiJIUzI1NiJ9.eyJ0aWQiOjF9.c2ln"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kind, id, ok := auth.ParseKey(tt.in)
			if ok != tt.wantOK {
				t.Fatalf("ParseKey(%q) ok = %v, want %v", tt.in, ok, tt.wantOK)
			}
			if !ok {
				if kind != "" || id != "" {
					t.Fatalf("rejected key returned kind %q id %q", kind, id)
				}
				return
			}
			if kind != tt.wantKind || id != tt.wantID {
				t.Fatalf("ParseKey = %q, %q; want %q, %q", kind, id, tt.wantKind, tt.wantID)
			}
		})
	}
}

func TestHashKey(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{name: "empty", in: "", want: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{name: "abc", in: "abc", want: "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := hex.EncodeToString(auth.HashKey(tt.in)); got != tt.want {
				t.Fatalf("HashKey(%q) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
	a, b := auth.HashKey("sk_a"), auth.HashKey("sk_b")
	if bytes.Equal(a, b) {
		t.Fatal("different keys hash equal")
	}
}

func TestRandomSecret(t *testing.T) {
	hexRE := regexp.MustCompile(`^[0-9a-f]*$`)
	for _, n := range []int{1, 16, 32} {
		a, err := auth.RandomSecret(n)
		if err != nil {
			t.Fatal(err)
		}
		b, err := auth.RandomSecret(n)
		if err != nil {
			t.Fatal(err)
		}
		if len(a) != 2*n || !hexRE.MatchString(a) {
			t.Fatalf("RandomSecret(%d) = %q, want %d lowercase hex chars", n, a, 2*n)
		}
		if n >= 16 && a == b {
			t.Fatalf("RandomSecret(%d) repeated %q", n, a)
		}
	}
}
