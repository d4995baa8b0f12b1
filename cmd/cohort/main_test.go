package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/auth"
	"github.com/cohort-dev/cohort/internal/secretbox"
	"github.com/cohort-dev/cohort/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const testSecret = "0123456789abcdef0123456789abcdef-test-secret"

func TestTenantsCreatePrintsOneJSONObject(t *testing.T) {
	t.Setenv("DATABASE_URL", testenv.Database(t))
	t.Setenv("COHORT_SECRET_KEY", testSecret)
	t.Setenv("COHORT_DATA_DIR", t.TempDir())

	var stdout, stderr bytes.Buffer
	if code := run([]string{"tenants", "create", "--slug", "acme", "--name", "Acme Inc"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, stderr: %s", code, stderr.String())
	}
	dec := json.NewDecoder(&stdout)
	var out map[string]any
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, stdout.String())
	}
	if dec.More() {
		t.Fatal("stdout holds more than one JSON value")
	}
	if id, ok := out["id"].(float64); !ok || id <= 0 || id != float64(int64(id)) {
		t.Fatalf("id %v is not a positive integer", out["id"])
	}
	for field, prefix := range map[string]string{"slug": "acme", "name": "Acme Inc", "secret_key": "sk_", "public_key": "pk_", "token": "eyJ", "webhook_secret": ""} {
		v, ok := out[field].(string)
		if !ok || !strings.HasPrefix(v, prefix) || v == "" {
			t.Errorf("%s = %v, want a string starting %q", field, out[field], prefix)
		}
	}
	signer, err := auth.NewSigner(secretbox.DeriveKey([]byte(testSecret), purposeTokens), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	claims, err := signer.Verify(out["token"].(string))
	if err != nil {
		t.Fatalf("token does not verify: %v", err)
	}
	if claims.TenantID != int64(out["id"].(float64)) || claims.Type != auth.TokenAccess {
		t.Fatalf("claims %+v", claims)
	}
	if ttl := time.Until(claims.ExpiresAt.Time); ttl < 23*time.Hour || ttl > 25*time.Hour {
		t.Fatalf("token valid for %v, want 24h", ttl)
	}

	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"tenants", "create", "--slug", "acme"}, &stdout, &stderr); code == 0 {
		t.Fatal("duplicate slug exited 0")
	}
	if !strings.Contains(stderr.String(), `"acme" is taken`) || stdout.Len() != 0 {
		t.Fatalf("duplicate slug: stdout %q stderr %q", stdout.String(), stderr.String())
	}

	stdout.Reset()
	if code := run([]string{"tenants", "token", "--slug", "acme"}, &stdout, &stderr); code != 0 {
		t.Fatalf("token: exit %d: %s", code, stderr.String())
	}
	var tok struct{ Token string }
	if err := json.Unmarshal(stdout.Bytes(), &tok); err != nil || tok.Token == "" {
		t.Fatalf("token output %q: %v", stdout.String(), err)
	}
	if _, err := signer.Verify(tok.Token); err != nil {
		t.Fatalf("fresh token does not verify: %v", err)
	}

	stdout.Reset()
	if code := run([]string{"tenants", "rotate-keys", "--slug", "acme", "--grace", "0s"}, &stdout, &stderr); code != 0 {
		t.Fatalf("rotate: exit %d: %s", code, stderr.String())
	}
	var rotated struct {
		SecretKey string `json:"secret_key"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rotated); err != nil || !strings.HasPrefix(rotated.SecretKey, "sk_") || rotated.SecretKey == out["secret_key"] {
		t.Fatalf("rotate output %q", stdout.String())
	}
}

func TestUsageErrors(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
		code int
	}{
		{"no command", nil, "usage: cohort", 2},
		{"unknown command", []string{"frobnicate"}, `unknown command "frobnicate"`, 2},
		{"tenants without slug", []string{"tenants", "create"}, "--slug is required", 2},
		{"unknown tenants command", []string{"tenants", "explode", "--slug", "x"}, `unknown tenants command "explode"`, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tc.args, &stdout, &stderr); code != tc.code {
				t.Fatalf("exit %d, want %d", code, tc.code)
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("stderr %q lacks %q", stderr.String(), tc.want)
			}
		})
	}
}

// Production roles fail at start with a message naming every missing setting.
func TestProductionRolesNameMissingSettings(t *testing.T) {
	for _, env := range []string{"DATABASE_URL", "TEMPORAL_ADDRESS", "PUBSUB_PROJECT", "PUBSUB_TOPIC", "PUBSUB_SUBSCRIPTION",
		"COHORT_SECRET_KEY", "COHORT_PUBLIC_URL", "BIGQUERY_PROJECT", "BIGQUERY_DATASET", "GCS_BUCKET", "OPENAI_API_KEY"} {
		t.Setenv(env, "")
	}
	cases := []struct {
		role string
		want []string
	}{
		// ... and what replaces the Google Cloud ones off Google Cloud.
		{"serve", []string{"DATABASE_URL", "TEMPORAL_ADDRESS", "PUBSUB_PROJECT", "PUBSUB_TOPIC", "COHORT_SECRET_KEY", "BIGQUERY_PROJECT", "GCS_BUCKET", "COHORT_PUBLIC_URL",
			"NATS_URL", "COHORT_WAREHOUSE=postgres", "COHORT_BLOB_STORE=local", "COHORT_DATA_DIR"}},
		{"worker", []string{"DATABASE_URL", "TEMPORAL_ADDRESS", "PUBSUB_SUBSCRIPTION", "BIGQUERY_DATASET"}},
		{"migrate", []string{"DATABASE_URL"}},
	}
	for _, tc := range cases {
		t.Run(tc.role, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run([]string{tc.role}, &stdout, &stderr); code != 2 {
				t.Fatalf("exit %d, want 2; stderr %s", code, stderr.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr %q does not name %s", stderr.String(), w)
				}
			}
		})
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// cohort dev end to end in this process: API, worker, embedded Temporal with its Web UI, pstest,
// migrations; a tenant created by the CLI while it runs authenticates against it; SIGINT stops
// everything within 10 s, and a second start reuses the data dir.
func TestDevStartsEverythingAndStopsOnSignal(t *testing.T) {
	dataDir := t.TempDir()
	t.Setenv("DATABASE_URL", testenv.Database(t))
	t.Setenv("COHORT_SECRET_KEY", "")
	t.Setenv("COHORT_DATA_DIR", dataDir)
	t.Setenv("TEMPORAL_ADDRESS", "")
	t.Setenv("PUBSUB_PROJECT", "")
	t.Setenv("COHORT_LOG_LEVEL", "warn")

	for round := 1; round <= 2; round++ {
		t.Run(fmt.Sprintf("start %d", round), func(t *testing.T) {
			apiAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
			uiPort := freePort(t)
			t.Setenv("COHORT_HTTP_ADDR", apiAddr)
			t.Setenv("COHORT_DEV_TEMPORAL_PORT", fmt.Sprint(freePort(t)))
			t.Setenv("COHORT_DEV_UI_PORT", fmt.Sprint(uiPort))

			stdout, stderr := &syncBuffer{}, &syncBuffer{}
			exited := make(chan int, 1)
			go func() { exited <- run([]string{"dev"}, stdout, stderr) }()

			base := "http://" + apiAddr
			waitFor(t, exited, stderr, func() bool {
				resp, err := http.Get(base + "/readyz")
				if err != nil {
					return false
				}
				_ = resp.Body.Close()
				return resp.StatusCode == http.StatusOK
			})
			banner := stdout.String()
			for _, want := range []string{base, fmt.Sprintf("http://127.0.0.1:%d", uiPort), "Database", dataDir} {
				if !strings.Contains(banner, want) {
					t.Errorf("banner lacks %q:\n%s", want, banner)
				}
			}
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", uiPort))
			if err != nil {
				t.Fatalf("temporal ui: %v", err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("temporal ui status %d", resp.StatusCode)
			}

			// The CLI reaches the same database and key while dev runs.
			var out, errb bytes.Buffer
			if code := run([]string{"tenants", "create", "--slug", fmt.Sprintf("dev-%d", round)}, &out, &errb); code != 0 {
				t.Fatalf("tenants create while dev runs: %d %s", code, errb.String())
			}
			var created struct {
				SecretKey string `json:"secret_key"`
				Token     string `json:"token"`
			}
			if err := json.Unmarshal(out.Bytes(), &created); err != nil {
				t.Fatal(err)
			}
			for _, authz := range []string{"ApiKey " + created.SecretKey, "Bearer " + created.Token} {
				req, _ := http.NewRequest(http.MethodGet, base+"/api/auth/whoami/", nil)
				req.Header.Set("Authorization", authz)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%s: status %d %s", strings.Fields(authz)[0], resp.StatusCode, body)
				}
			}

			start := time.Now()
			if err := syscall.Kill(syscall.Getpid(), syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			select {
			case code := <-exited:
				if code != 0 {
					t.Fatalf("dev exited %d: %s", code, stderr.String())
				}
			case <-time.After(10 * time.Second):
				t.Fatal("dev did not stop within 10s of SIGINT")
			}
			t.Logf("shutdown took %v", time.Since(start).Round(time.Millisecond))
			for _, addr := range []string{apiAddr, fmt.Sprintf("127.0.0.1:%d", uiPort)} {
				if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
					_ = c.Close()
					t.Errorf("%s still listening after shutdown", addr)
				}
			}
		})
	}
}

func waitFor(t *testing.T, exited <-chan int, stderr *syncBuffer, ok func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for !ok() {
		select {
		case code := <-exited:
			t.Fatalf("dev exited early with %d: %s", code, stderr.String())
		case <-ctx.Done():
			t.Fatalf("dev not ready within 90s: %s", stderr.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
