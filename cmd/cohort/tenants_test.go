package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/auth"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/secretbox"
	"github.com/cohort-dev/cohort/internal/testenv"
)

// runTenantsCmd runs `cohort tenants args...` and returns its exit code, stdout and stderr.
func runTenantsCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(append([]string{"tenants"}, args...), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// authenticatorFor is the authenticator a server started with secret would use over the database.
func authenticatorFor(t *testing.T, dbURL, secret string) *auth.Authenticator {
	t.Helper()
	svc := tenantServiceFor(t, dbURL, secret)
	signer, err := auth.NewSigner(secretbox.DeriveKey([]byte(secret), purposeTokens), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	return auth.NewAuthenticator(auth.Deps{Keys: svc, Tenants: svc, Identity: svc, Signer: signer, CacheTTL: time.Nanosecond})
}

// TestTenantsRevokeTokens: revoke-tokens (with --tenant or --slug) and rotate-keys each revoke
// every token minted before; tokens minted after work.
func TestTenantsRevokeTokens(t *testing.T) {
	dbURL := testenv.Database(t)
	t.Setenv("DATABASE_URL", dbURL)
	t.Setenv("COHORT_SECRET_KEY", testSecret)
	t.Setenv("COHORT_DATA_DIR", t.TempDir())
	a := authenticatorFor(t, dbURL, testSecret)
	ctx := context.Background()

	code, out, stderr := runTenantsCmd(t, "create", "--slug", "acme")
	if code != 0 {
		t.Fatalf("create: exit %d: %s", code, stderr)
	}
	var created struct{ Token string }
	if err := json.Unmarshal([]byte(out), &created); err != nil {
		t.Fatal(err)
	}
	token := func() string {
		t.Helper()
		code, out, stderr := runTenantsCmd(t, "token", "--slug", "acme")
		var tok struct{ Token string }
		if code != 0 || json.Unmarshal([]byte(out), &tok) != nil {
			t.Fatalf("token: exit %d: %s %s", code, out, stderr)
		}
		return tok.Token
	}
	authn := func(tok string) error {
		_, err := a.Authenticate(ctx, "Bearer "+tok, "", false)
		return err
	}
	wantRevoked := func(what, tok string) {
		t.Helper()
		if err := authn(tok); !errors.Is(err, errs.ErrUnauthenticated) || !strings.Contains(err.Error(), "revoked") {
			t.Fatalf("%s: err = %v, want unauthenticated: revoked", what, err)
		}
	}
	if err := authn(created.Token); err != nil {
		t.Fatalf("token from create: %v", err)
	}

	for i, flag := range []string{"--tenant", "--slug"} {
		before := token()
		code, out, stderr := runTenantsCmd(t, "revoke-tokens", flag, "acme")
		if code != 0 {
			t.Fatalf("revoke-tokens %s: exit %d: %s", flag, code, stderr)
		}
		var res map[string]any
		dec := json.NewDecoder(strings.NewReader(out))
		if err := dec.Decode(&res); err != nil || dec.More() {
			t.Fatalf("revoke-tokens output %q is not one JSON object: %v", out, err)
		}
		if res["slug"] != "acme" || res["tokens_revoked"] != true || res["token_generation"] != float64(i+1) {
			t.Fatalf("revoke-tokens output %v", res)
		}
		wantRevoked("token minted before revoke-tokens "+flag, before)
		if err := authn(token()); err != nil {
			t.Fatalf("token minted after revoke-tokens: %v", err)
		}
	}
	wantRevoked("token from create", created.Token)

	before := token()
	if code, out, stderr := runTenantsCmd(t, "rotate-keys", "--slug", "acme"); code != 0 || !strings.Contains(out, `"tokens_revoked": true`) {
		t.Fatalf("rotate-keys: exit %d: %s %s", code, out, stderr)
	}
	wantRevoked("token minted before rotate-keys", before)
	if err := authn(token()); err != nil {
		t.Fatalf("token minted after rotate-keys: %v", err)
	}

	if code, _, stderr := runTenantsCmd(t, "revoke-tokens", "--slug", "nobody"); code == 0 || !strings.Contains(stderr, "nobody") {
		t.Fatalf("revoke-tokens of an unknown tenant: exit %d: %s", code, stderr)
	}
	if code, out, stderr := runTenantsCmd(t, "help"); code != 0 || !strings.Contains(out, "revoke-tokens --slug S") {
		t.Fatalf("help: exit %d, want 0 and the usage naming revoke-tokens on stdout: %s %s", code, out, stderr)
	}
}

// TestTenantsSecretKeyMismatch: tenants commands run with another secret key than the one the
// database was set up with (another data dir, no data dir, another COHORT_SECRET_KEY) stop with a
// message that says what to do, mint nothing, and leave no new key file behind.
func TestTenantsSecretKeyMismatch(t *testing.T) {
	t.Setenv("DATABASE_URL", testenv.Database(t))
	t.Setenv("COHORT_SECRET_KEY", "")
	home := t.TempDir()
	dataDir := filepath.Join(home, ".cohort")
	t.Setenv("COHORT_DATA_DIR", dataDir)

	// First use: the dev key is made under the data dir and its fingerprint stored.
	if code, _, stderr := runTenantsCmd(t, "create", "--slug", "acme"); code != 0 {
		t.Fatalf("create: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "secret.key")); err != nil {
		t.Fatalf("dev key file: %v", err)
	}

	elsewhere := filepath.Join(t.TempDir(), ".cohort")
	otherKeyDir := filepath.Join(t.TempDir(), ".cohort")
	if err := os.MkdirAll(otherKeyDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(otherKeyDir, "secret.key"), []byte(strings.Repeat("z", 64)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		dataDir string
		secret  string
		want    []string
	}{
		{name: "data dir without a key", dataDir: elsewhere,
			want: []string{"no secret key at " + filepath.Join(elsewhere, "secret.key"), "already set up", "COHORT_DATA_DIR", "COHORT_SECRET_KEY"}},
		{name: "data dir with another key", dataDir: otherKeyDir,
			want: []string{"another secret key than the dev key file " + filepath.Join(otherKeyDir, "secret.key"), "COHORT_DATA_DIR", "COHORT_SECRET_KEY"}},
		{name: "another COHORT_SECRET_KEY", dataDir: dataDir, secret: testSecret,
			want: []string{"another secret key than COHORT_SECRET_KEY", "COHORT_DATA_DIR"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("COHORT_DATA_DIR", tt.dataDir)
			t.Setenv("COHORT_SECRET_KEY", tt.secret)
			for _, args := range [][]string{{"token", "--slug", "acme"}, {"create", "--slug", "beta"}, {"rotate-keys", "--slug", "acme"}} {
				code, out, stderr := runTenantsCmd(t, args...)
				if code == 0 || out != "" {
					t.Fatalf("%v: exit %d, stdout %q; want a failure and nothing printed", args, code, out)
				}
				for _, w := range tt.want {
					if !strings.Contains(stderr, w) {
						t.Errorf("%v: stderr %q lacks %q", args, stderr, w)
					}
				}
			}
		})
	}
	if _, err := os.Stat(elsewhere); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a run from a directory without the data dir left %s behind (%v)", elsewhere, err)
	}
	// Nothing was changed: beta does not exist, and acme's keys were not rotated.
	t.Setenv("COHORT_DATA_DIR", dataDir)
	t.Setenv("COHORT_SECRET_KEY", "")
	code, out, stderr := runTenantsCmd(t, "keys", "--slug", "acme")
	if code != 0 || strings.Count(out, `"key_id"`) != 2 {
		t.Fatalf("keys of acme: exit %d: %s %s", code, out, stderr)
	}
	if code, _, _ := runTenantsCmd(t, "token", "--slug", "beta"); code == 0 {
		t.Fatal("beta was created with the wrong key")
	}
	if code, _, stderr := runTenantsCmd(t, "token", "--slug", "acme"); code != 0 {
		t.Fatalf("token from the right data dir: exit %d: %s", code, stderr)
	}
}

// TestRolesRefuseAnotherSecretKey: dev and serve started with another secret key than the one the
// database was set up with stop at once, before they start anything, with a message that says
// which key to use (they would mint tokens the database's clients refuse and seal secrets with a
// key nobody else has).
func TestRolesRefuseAnotherSecretKey(t *testing.T) {
	dbURL := testenv.Database(t)
	t.Setenv("DATABASE_URL", dbURL)
	t.Setenv("COHORT_DATA_DIR", filepath.Join(t.TempDir(), ".cohort"))
	t.Setenv("COHORT_SECRET_KEY", testSecret)
	if code, _, stderr := runTenantsCmd(t, "create", "--slug", "acme"); code != 0 {
		t.Fatalf("create: exit %d: %s", code, stderr)
	}
	other := strings.Repeat("k", 48)
	for _, role := range []string{"dev", "serve"} {
		t.Run(role, func(t *testing.T) {
			t.Setenv("COHORT_SECRET_KEY", other)
			t.Setenv("COHORT_HTTP_ADDR", fmt.Sprintf("127.0.0.1:%d", freePort(t)))
			t.Setenv("COHORT_DEV_TEMPORAL_PORT", fmt.Sprint(freePort(t)))
			t.Setenv("COHORT_DEV_UI_PORT", "0")
			t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1") // serve needs one named; it must not get that far
			for _, k := range []string{"PUBSUB_PROJECT", "PUBSUB_TOPIC", "BIGQUERY_PROJECT", "BIGQUERY_DATASET", "GCS_BUCKET"} {
				t.Setenv(k, "unused") // serve's required settings; it must stop before it uses them
			}
			t.Setenv("COHORT_PUBLIC_URL", "https://cohort.example")
			if role == "dev" {
				t.Setenv("TEMPORAL_ADDRESS", "")
			}
			var stdout, stderr bytes.Buffer
			done := make(chan int, 1)
			go func() { done <- run([]string{role}, &stdout, &stderr) }()
			select {
			case code := <-done:
				if code == 0 || !strings.Contains(stderr.String(), "another secret key than COHORT_SECRET_KEY") {
					t.Fatalf("exit %d, stderr %q: want a failure naming the key", code, stderr.String())
				}
				if strings.Contains(stdout.String(), "is running") {
					t.Fatalf("%s started: %s", role, stdout.String())
				}
			case <-time.After(60 * time.Second):
				t.Fatalf("%s with another secret key is still running", role)
			}
		})
	}
}
