package secretbox

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func testKey(b byte) []byte { return bytes.Repeat([]byte{b}, KeySize) }

func newTestBox(t *testing.T, keys map[string][]byte, active string) *Box {
	t.Helper()
	b, err := New(keys, active)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	key := testKey(1)
	box := newTestBox(t, map[string][]byte{KeyID(key): key}, KeyID(key))
	tests := []struct {
		name      string
		plaintext []byte
		aad       []byte
	}{
		{name: "api key with aad", plaintext: []byte("pk_live_abc123"), aad: []byte("tenant:12/connector:5/api_key")},
		{name: "nil aad", plaintext: []byte("secret"), aad: nil},
		{name: "empty plaintext", plaintext: []byte{}, aad: []byte("x")},
		{name: "binary plaintext", plaintext: []byte{0, 1, 2, 255, ':', '\n'}, aad: []byte{0}},
		{name: "large plaintext", plaintext: bytes.Repeat([]byte("a"), 1<<16), aad: []byte("big")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sealed, err := box.Seal(tt.plaintext, tt.aad)
			if err != nil {
				t.Fatalf("Seal: %v", err)
			}
			prefix := "v1:" + KeyID(key) + ":"
			if !strings.HasPrefix(sealed, prefix) {
				t.Fatalf("sealed %q lacks prefix %q", sealed, prefix)
			}
			if len(tt.plaintext) > 0 && strings.Contains(sealed, string(tt.plaintext)) {
				t.Fatalf("sealed value contains the plaintext")
			}
			got, err := box.Open(sealed, tt.aad)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if !bytes.Equal(got, tt.plaintext) {
				t.Fatalf("Open = %q, want %q", got, tt.plaintext)
			}
		})
	}
}

func TestStringHelpers(t *testing.T) {
	key := testKey(2)
	box := newTestBox(t, map[string][]byte{"k1": key}, "k1")
	sealed, err := box.SealString("hunter2", "tenant:1/connector:1/api_key")
	if err != nil {
		t.Fatalf("SealString: %v", err)
	}
	got, err := box.OpenString(sealed, "tenant:1/connector:1/api_key")
	if err != nil || got != "hunter2" {
		t.Fatalf("OpenString = %q, %v; want hunter2, nil", got, err)
	}
	if _, err := box.OpenString(sealed, "tenant:2/connector:1/api_key"); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("OpenString with other aad: err = %v, want ErrDecrypt", err)
	}
}

func TestTamperAnyByte(t *testing.T) {
	key := testKey(3)
	box := newTestBox(t, map[string][]byte{"k": key}, "k")
	aad := []byte("tenant:1/connector:2/token")
	sealed, err := box.Seal([]byte("top secret value"), aad)
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}
	prefix := "v1:k:"
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(sealed, prefix))
	if err != nil {
		t.Fatalf("decode payload: %v", err)
	}
	for i := range payload {
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			tampered := bytes.Clone(payload)
			tampered[i] ^= mask
			_, err := box.Open(prefix+base64.RawURLEncoding.EncodeToString(tampered), aad)
			if !errors.Is(err, ErrDecrypt) {
				t.Fatalf("byte %d ^ %#x: err = %v, want ErrDecrypt", i, mask, err)
			}
		}
	}
	// Truncating or extending the payload must fail too.
	for _, p := range [][]byte{payload[:len(payload)-1], append(bytes.Clone(payload), 0)} {
		if _, err := box.Open(prefix+base64.RawURLEncoding.EncodeToString(p), aad); !errors.Is(err, ErrDecrypt) {
			t.Fatalf("length %d: err = %v, want ErrDecrypt", len(p), err)
		}
	}
}

func TestOpenFailures(t *testing.T) {
	keyA, keyB := testKey(4), testKey(5)
	boxA := newTestBox(t, map[string][]byte{"a": keyA}, "a")
	aad := []byte("tenant:12/connector:5/api_key")
	sealed, err := boxA.Seal([]byte("plaintext-must-not-leak"), aad)
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}
	// Same id, different key material: the classic "wrong key" case.
	boxWrongKey := newTestBox(t, map[string][]byte{"a": keyB}, "a")
	boxOtherID := newTestBox(t, map[string][]byte{"b": keyA}, "b")

	tests := []struct {
		name    string
		box     *Box
		sealed  string
		aad     []byte
		wantErr error
	}{
		{name: "wrong aad", box: boxA, sealed: sealed, aad: []byte("tenant:12/connector:6/api_key"), wantErr: ErrDecrypt},
		{name: "missing aad", box: boxA, sealed: sealed, aad: nil, wantErr: ErrDecrypt},
		{name: "wrong key same id", box: boxWrongKey, sealed: sealed, aad: aad, wantErr: ErrDecrypt},
		{name: "unknown key id", box: boxOtherID, sealed: sealed, aad: aad, wantErr: ErrUnknownKey},
		{name: "key id swapped in header", box: newTestBox(t, map[string][]byte{"a": keyA, "b": keyB}, "a"), sealed: strings.Replace(sealed, "v1:a:", "v1:b:", 1), aad: aad, wantErr: ErrDecrypt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.box.Open(tt.sealed, tt.aad)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if got != nil {
				t.Fatalf("got plaintext %q on error", got)
			}
			assertNoLeak(t, err.Error(), "plaintext-must-not-leak", keyA, keyB)
		})
	}
}

func TestMalformed(t *testing.T) {
	key := testKey(6)
	box := newTestBox(t, map[string][]byte{"k": key}, "k")
	good, err := box.Seal([]byte("x"), nil)
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}
	payload := strings.TrimPrefix(good, "v1:k:")
	short := base64.RawURLEncoding.EncodeToString(make([]byte, nonceSize+tagSize-1))

	tests := []struct {
		name   string
		sealed string
	}{
		{name: "empty", sealed: ""},
		{name: "no separators", sealed: "garbage"},
		{name: "version only", sealed: "v1"},
		{name: "version and colon", sealed: "v1:"},
		{name: "missing payload separator", sealed: "v1:k"},
		{name: "empty key id", sealed: "v1::" + payload},
		{name: "unsupported version", sealed: "v2:k:" + payload},
		{name: "uppercase version", sealed: "V1:k:" + payload},
		{name: "empty payload", sealed: "v1:k:"},
		{name: "payload too short", sealed: "v1:k:" + short},
		{name: "std base64 with padding", sealed: "v1:k:" + payload + "="},
		{name: "invalid base64 chars", sealed: "v1:k:" + "!!!!" + payload},
		{name: "extra field", sealed: "v1:k:" + payload + ":extra"},
		{name: "whitespace", sealed: " v1:k:" + payload},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := box.Open(tt.sealed, nil)
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Open(%q): err = %v, want ErrMalformed", tt.sealed, err)
			}
			if got != nil {
				t.Fatalf("got plaintext on error")
			}
		})
	}
}

func TestRotation(t *testing.T) {
	oldKey, newKey := testKey(7), testKey(8)
	oldID, newID := KeyID(oldKey), KeyID(newKey)
	aad := []byte("tenant:3/connector:9/api_key")

	oldBox := newTestBox(t, map[string][]byte{oldID: oldKey}, oldID)
	oldSealed, err := oldBox.Seal([]byte("old secret"), aad)
	if err != nil {
		t.Fatalf("Seal old: %v", err)
	}

	rotated := newTestBox(t, map[string][]byte{oldID: oldKey, newID: newKey}, newID)
	if rotated.ActiveID() != newID {
		t.Fatalf("ActiveID = %q, want %q", rotated.ActiveID(), newID)
	}
	got, err := rotated.Open(oldSealed, aad)
	if err != nil || string(got) != "old secret" {
		t.Fatalf("rotated Open(old) = %q, %v", got, err)
	}
	newSealed, err := rotated.Seal([]byte("new secret"), aad)
	if err != nil {
		t.Fatalf("Seal new: %v", err)
	}
	if !strings.HasPrefix(newSealed, "v1:"+newID+":") {
		t.Fatalf("new seal %q not under new key id %q", newSealed, newID)
	}
	if _, err := oldBox.Open(newSealed, aad); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("old box opening new seal: err = %v, want ErrUnknownKey", err)
	}
	// Once the old key is retired, old values report an unknown key.
	retired := newTestBox(t, map[string][]byte{newID: newKey}, newID)
	if _, err := retired.Open(oldSealed, aad); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("retired box opening old seal: err = %v, want ErrUnknownKey", err)
	}
}

func TestNonceUniqueness(t *testing.T) {
	key := testKey(9)
	box := newTestBox(t, map[string][]byte{"k": key}, "k")
	seen := make(map[string]bool)
	nonces := make(map[string]bool)
	for i := range 1000 {
		s, err := box.Seal([]byte("same plaintext"), []byte("same aad"))
		if err != nil {
			t.Fatalf("Seal: %v", err)
		}
		if seen[s] {
			t.Fatalf("seal %d repeated a previous output", i)
		}
		seen[s] = true
		payload, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(s, "v1:k:"))
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		n := string(payload[:nonceSize])
		if nonces[n] {
			t.Fatalf("seal %d repeated a nonce", i)
		}
		nonces[n] = true
	}
}

func TestNew(t *testing.T) {
	good := testKey(10)
	tests := []struct {
		name    string
		keys    map[string][]byte
		active  string
		wantErr error
	}{
		{name: "valid", keys: map[string][]byte{"k": good}, active: "k"},
		{name: "no keys", keys: nil, active: "k", wantErr: ErrInvalidKey},
		{name: "short key", keys: map[string][]byte{"k": good[:16]}, active: "k", wantErr: ErrInvalidKey},
		{name: "long key", keys: map[string][]byte{"k": append(bytes.Clone(good), 0)}, active: "k", wantErr: ErrInvalidKey},
		{name: "empty key id", keys: map[string][]byte{"": good}, active: "", wantErr: ErrInvalidKey},
		{name: "colon in key id", keys: map[string][]byte{"a:b": good}, active: "a:b", wantErr: ErrInvalidKey},
		{name: "active id missing", keys: map[string][]byte{"k": good}, active: "other", wantErr: ErrUnknownKey},
		{name: "empty active id", keys: map[string][]byte{"k": good}, active: "", wantErr: ErrUnknownKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := New(tt.keys, tt.active)
			if tt.wantErr == nil {
				if err != nil || b == nil {
					t.Fatalf("New = %v, %v; want box", b, err)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			assertNoLeak(t, err.Error(), "", good)
		})
	}
}

func TestNewCopiesKeys(t *testing.T) {
	key := testKey(11)
	keys := map[string][]byte{"k": key}
	box := newTestBox(t, keys, "k")
	sealed, err := box.Seal([]byte("v"), nil)
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}
	key[0] ^= 0xff // caller reuses its buffer
	delete(keys, "k")
	if got, err := box.Open(sealed, nil); err != nil || string(got) != "v" {
		t.Fatalf("Open after caller mutation = %q, %v", got, err)
	}
}

func TestFormatHidesKeys(t *testing.T) {
	key := testKey(0xab)
	box := newTestBox(t, map[string][]byte{"k": key}, "k")
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%d", "%q"} {
		out := fmt.Sprintf(verb, box)
		assertNoLeak(t, out, "", key)
		if !strings.Contains(out, `active: "k"`) {
			t.Errorf("%s: %q does not describe the box", verb, out)
		}
	}
	var nilBox *Box
	if got := fmt.Sprint(nilBox); got != "secretbox.Box(nil)" {
		t.Errorf("nil box prints %q", got)
	}
}

func TestDeriveKey(t *testing.T) {
	master := []byte("0123456789abcdef0123456789abcdef")
	tests := []struct {
		name      string
		masterA   []byte
		purposeA  string
		masterB   []byte
		purposeB  string
		wantEqual bool
	}{
		{name: "deterministic", masterA: master, purposeA: "secretbox", masterB: bytes.Clone(master), purposeB: "secretbox", wantEqual: true},
		{name: "purpose separation", masterA: master, purposeA: "secretbox", masterB: master, purposeB: "token-signing", wantEqual: false},
		{name: "purpose is case sensitive", masterA: master, purposeA: "blob", masterB: master, purposeB: "Blob", wantEqual: false},
		{name: "master separation", masterA: master, purposeA: "secretbox", masterB: []byte("another master secret of 32 byte"), purposeB: "secretbox", wantEqual: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := DeriveKey(tt.masterA, tt.purposeA), DeriveKey(tt.masterB, tt.purposeB)
			if len(a) != KeySize || len(b) != KeySize {
				t.Fatalf("lengths %d, %d; want %d", len(a), len(b), KeySize)
			}
			if bytes.Equal(a, b) != tt.wantEqual {
				t.Fatalf("equal = %v, want %v", bytes.Equal(a, b), tt.wantEqual)
			}
			if bytes.Equal(a, tt.masterA[:min(len(tt.masterA), KeySize)]) {
				t.Fatalf("derived key equals master")
			}
		})
	}

	// RFC 5869 test case 3 (SHA-256, no salt, empty info), first 32 bytes of OKM.
	ikm := bytes.Repeat([]byte{0x0b}, 22)
	want, _ := hex.DecodeString("8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d")
	if got := DeriveKey(ikm, ""); !bytes.Equal(got, want) {
		t.Fatalf("RFC 5869 vector: got %x, want %x", got, want)
	}

	// A derived key works as a Box key.
	k := DeriveKey(master, "secretbox")
	box := newTestBox(t, map[string][]byte{KeyID(k): k}, KeyID(k))
	s, err := box.SealString("v", "")
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}
	if got, err := box.OpenString(s, ""); err != nil || got != "v" {
		t.Fatalf("Open = %q, %v", got, err)
	}
}

func TestKeyID(t *testing.T) {
	tests := []struct {
		name string
		key  []byte
		want string
	}{
		// sha256("") = e3b0c442...
		{name: "empty", key: nil, want: "e3b0c442"},
		// sha256("abc") = ba7816bf...
		{name: "abc", key: []byte("abc"), want: "ba7816bf"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := KeyID(tt.key); got != tt.want {
				t.Fatalf("KeyID = %q, want %q", got, tt.want)
			}
		})
	}
	a, b := testKey(1), testKey(2)
	if KeyID(a) == KeyID(b) {
		t.Fatalf("distinct keys share an id")
	}
	if KeyID(a) != KeyID(bytes.Clone(a)) || len(KeyID(a)) != 8 {
		t.Fatalf("KeyID not stable 8-char: %q", KeyID(a))
	}
}

// assertNoLeak fails if s contains the plaintext or any key in raw, hex or
// base64url form.
func assertNoLeak(t *testing.T, s, plaintext string, keys ...[]byte) {
	t.Helper()
	if plaintext != "" && strings.Contains(s, plaintext) {
		t.Fatalf("%q leaks the plaintext", s)
	}
	for _, k := range keys {
		for _, form := range []string{string(k), hex.EncodeToString(k), base64.RawURLEncoding.EncodeToString(k), fmt.Sprint(k)} {
			if strings.Contains(s, form) {
				t.Fatalf("%q leaks a key", s)
			}
		}
	}
}

func TestResealString(t *testing.T) {
	oldBox := newTestBox(t, map[string][]byte{"old": testKey(1)}, "old")
	sealed, err := oldBox.SealString("klaviyo-key", "tenant:1/x")
	if err != nil {
		t.Fatal(err)
	}
	rotated := newTestBox(t, map[string][]byte{"old": testKey(1), "new": testKey(2)}, "new")
	out, changed, err := rotated.ResealString(sealed, "tenant:1/x")
	if err != nil || !changed || !strings.HasPrefix(out, "v1:new:") {
		t.Fatalf("reseal = %q, %v, %v; want a value under the new key", out, changed, err)
	}
	newOnly := newTestBox(t, map[string][]byte{"new": testKey(2)}, "new")
	if got, err := newOnly.OpenString(out, "tenant:1/x"); err != nil || got != "klaviyo-key" {
		t.Fatalf("open resealed without the old key = %q, %v", got, err)
	}
	again, changed, err := rotated.ResealString(out, "tenant:1/x")
	if err != nil || changed || again != out {
		t.Fatalf("resealing a value under the active key changed it: %q, %v, %v", again, changed, err)
	}
	if _, _, err := rotated.ResealString(out, "tenant:2/x"); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("wrong aad under the active key: %v, want ErrDecrypt", err)
	}
	if _, _, err := rotated.ResealString(sealed, "tenant:2/x"); !errors.Is(err, ErrDecrypt) {
		t.Fatalf("wrong aad under an old key: %v, want ErrDecrypt", err)
	}
	if _, _, err := newOnly.ResealString(sealed, "tenant:1/x"); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("old key not held: %v, want ErrUnknownKey", err)
	}
}
