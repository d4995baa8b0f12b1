package shopify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cohort-dev/cohort/internal/errs"
)

// sign computes the header the way Shopify documents it: the HMAC-SHA256 digest of the raw body,
// keyed with the app's client secret, encoded with standard, padded base64.
func sign(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

func TestVerify(t *testing.T) {
	secret := []byte("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")
	body := []byte(`{"id":5829462016123,"email":"ana.souza@example.com","total_price":"155.12"}`)
	good := sign(secret, body)
	digest, _ := base64.StdEncoding.DecodeString(good)

	tests := []struct {
		name    string
		secret  []byte
		body    []byte
		header  string
		wantErr bool
	}{
		{name: "right secret", secret: secret, body: body, header: good},
		{name: "right secret, surrounding spaces", secret: secret, body: body, header: "  " + good + " "},
		{name: "wrong secret", secret: []byte("shpss_not-the-secret"), body: body, header: good, wantErr: true},
		{name: "tampered body", secret: secret, body: []byte(`{"id":5829462016123,"email":"ana.souza@example.com","total_price":"1.00"}`), header: good, wantErr: true},
		{name: "body with one extra byte", secret: secret, body: append(append([]byte{}, body...), '\n'), header: good, wantErr: true},
		{name: "empty header", secret: secret, body: body, header: "", wantErr: true},
		{name: "blank header", secret: secret, body: body, header: "   ", wantErr: true},
		{name: "non-base64 header", secret: secret, body: body, header: "not*base64!", wantErr: true},
		{name: "hex digest instead of base64", secret: secret, body: body, header: hex.EncodeToString(digest), wantErr: true},
		{name: "header truncated by one character", secret: secret, body: body, header: good[:len(good)-1], wantErr: true},
		{name: "header truncated to a shorter valid base64", secret: secret, body: body, header: good[:len(good)-4], wantErr: true},
		{name: "digest truncated then re-encoded", secret: secret, body: body, header: base64.StdEncoding.EncodeToString(digest[:16]), wantErr: true},
		{name: "digest with a trailing byte", secret: secret, body: body, header: base64.StdEncoding.EncodeToString(append(append([]byte{}, digest...), 0)), wantErr: true},
		{name: "unpadded base64", secret: secret, body: body, header: base64.RawStdEncoding.EncodeToString(digest), wantErr: true},
		{name: "empty secret refuses even a matching header", secret: nil, body: body, header: sign(nil, body), wantErr: true},
		{name: "empty body, right signature", secret: secret, body: nil, header: sign(secret, nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Verify(tt.secret, tt.body, tt.header)
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("Verify = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrBadSignature) {
				t.Fatalf("Verify = %v, want ErrBadSignature", err)
			}
			if !errors.Is(err, errs.ErrUnauthenticated) {
				t.Errorf("Verify error %v does not match errs.ErrUnauthenticated (401)", err)
			}
			var coded *errs.CodedError
			if !errors.As(err, &coded) || coded.Code != "bad_signature" {
				t.Errorf("Verify error %v: want a CodedError with code bad_signature", err)
			}
		})
	}
}

// TestVerifyKnownVector pins the construction to an independent HMAC-SHA256 test vector
// (key "key", message "The quick brown fox jumps over the lazy dog"), rendered as Shopify sends it.
func TestVerifyKnownVector(t *testing.T) {
	digest, err := hex.DecodeString("f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8")
	if err != nil {
		t.Fatal(err)
	}
	header := base64.StdEncoding.EncodeToString(digest)
	if header != "97yD9DBThCSxMpjmqm+xQ+9NWaFJRhdZl0edvC0aPNg=" {
		t.Fatalf("base64 of the vector = %q", header)
	}
	if err := Verify([]byte("key"), []byte("The quick brown fox jumps over the lazy dog"), header); err != nil {
		t.Fatalf("Verify(known vector) = %v", err)
	}
}

// TestVerifyShopifyRecipe signs every fixture body the way Shopify's documentation does
// (Ruby: Base64.strict_encode64(OpenSSL::HMAC.digest('sha256', secret, raw_body)); Node:
// crypto.createHmac('sha256', secret).update(rawBody).digest('base64')) and checks that Verify
// accepts it, then that it rejects the same header once the body is re-serialised.
func TestVerifyShopifyRecipe(t *testing.T) {
	secret := []byte("a1b2c3d4e5f60718293a4b5c6d7e8f90")
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			mac := hmac.New(sha256.New, secret)
			mac.Write(raw)
			header := base64.StdEncoding.EncodeToString(mac.Sum(nil))
			if err := Verify(secret, raw, header); err != nil {
				t.Fatalf("Verify(raw body) = %v", err)
			}
			// A handler that parses and re-encodes before verifying breaks the signature.
			reencoded := []byte(string(raw) + " ")
			if err := Verify(secret, reencoded, header); !errors.Is(err, ErrBadSignature) {
				t.Fatalf("Verify(altered body) = %v, want ErrBadSignature", err)
			}
		})
	}
}
