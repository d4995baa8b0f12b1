package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/config"
	"github.com/cohort-dev/cohort/internal/testenv"
)

// devStack is a cohort dev running in this test process.
type devStack struct {
	base     string
	dbURL    string
	dataDir  string
	tenantID int64
	secret   string
	public   string // the tenant's pk_ key
	token    string
	webhook  string
	slug     string
	temporal string // host:port of the embedded Temporal frontend
}

// startDev runs cohort dev on free ports against a fresh database and creates one tenant.
func startDev(t *testing.T) *devStack {
	t.Helper()
	return startDevWith(t, nil, nil)
}

// startDevWith is startDev with extraEnv added to (or replacing) the dev's environment and, when
// logTo is not nil, the dev's log written there at debug level (it must be safe for concurrent
// writes) instead of stderr at warn.
func startDevWith(t *testing.T, extraEnv map[string]string, logTo io.Writer) *devStack {
	t.Helper()
	dataDir := t.TempDir()
	dbURL := testenv.Database(t)
	env := map[string]string{
		"DATABASE_URL":             dbURL,
		"COHORT_DATA_DIR":          dataDir,
		"COHORT_HTTP_ADDR":         fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		"COHORT_DEV_TEMPORAL_PORT": fmt.Sprint(freePort(t)),
		"COHORT_DEV_UI_PORT":       "0",
		"COHORT_LOG_LEVEL":         "warn",
	}
	if logTo != nil {
		env["COHORT_LOG_LEVEL"] = "debug"
	}
	for k, v := range extraEnv {
		env[k] = v
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if logTo != nil {
		logger = slog.New(slog.NewTextHandler(logTo, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	_, fixedPorts := extraEnv["COHORT_HTTP_ADDR"]
	var s *devStack
	for attempt := 1; ; attempt++ {
		cfg, err := config.Load(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- runDev(ctx, cfg, logger, io.Discard) }()
		s = &devStack{base: "http://" + env["COHORT_HTTP_ADDR"], dbURL: dbURL, dataDir: dataDir, slug: "shop", temporal: "127.0.0.1:" + env["COHORT_DEV_TEMPORAL_PORT"]}
		exited, ready := waitDevReady(s.base, done)
		if ready {
			t.Cleanup(func() {
				cancel()
				select {
				case err := <-done:
					if err != nil {
						t.Errorf("dev exited with %v", err)
					}
				case <-time.After(15 * time.Second):
					t.Error("dev did not stop within 15s")
				}
			})
			break
		}
		cancel()
		if exited == nil { // not ready in time: stop it before failing
			select {
			case <-done:
			case <-time.After(15 * time.Second):
			}
			t.Fatal("dev not ready within 90s")
		}
		// A port picked free here can be taken by another test process before dev binds it.
		if !fixedPorts && attempt < 3 && strings.Contains(exited.Error(), "in use") {
			t.Logf("dev could not bind a port picked for it, retrying with new ports: %v", exited)
			env["COHORT_HTTP_ADDR"] = fmt.Sprintf("127.0.0.1:%d", freePort(t))
			env["COHORT_DEV_TEMPORAL_PORT"] = fmt.Sprint(freePort(t))
			continue
		}
		t.Fatalf("dev exited early: %v", exited)
	}
	// Same database and data dir (dev key file) as the running stack.
	t.Setenv("DATABASE_URL", dbURL)
	t.Setenv("COHORT_DATA_DIR", dataDir)
	t.Setenv("COHORT_SECRET_KEY", "")
	var out, errb bytes.Buffer
	if code := run([]string{"tenants", "create", "--slug", s.slug}, &out, &errb); code != 0 {
		t.Fatalf("tenants create: %s", errb.String())
	}
	var created struct {
		ID            int64  `json:"id"`
		SecretKey     string `json:"secret_key"`
		PublicKey     string `json:"public_key"`
		Token         string `json:"token"`
		WebhookSecret string `json:"webhook_secret"`
	}
	if err := json.Unmarshal(out.Bytes(), &created); err != nil {
		t.Fatal(err)
	}
	s.tenantID, s.secret, s.public, s.token, s.webhook = created.ID, created.SecretKey, created.PublicKey, created.Token, created.WebhookSecret
	return s
}

// do sends a request and decodes a JSON answer into out (when not nil); it returns the status.
func (s *devStack) do(t *testing.T, method, path, authz string, body []byte, headers map[string]string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, s.base+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, raw, err)
		}
	}
	if resp.StatusCode >= 500 {
		t.Logf("%s %s: %d %s", method, path, resp.StatusCode, strings.TrimSpace(string(raw)))
	}
	return resp.StatusCode
}

// eventually polls cond until it holds or 30 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitDevReady polls base/readyz for up to 90 s: ready, or the error dev exited with (exited is
// nil and ready false on a timeout).
func waitDevReady(base string, done <-chan error) (exited error, ready bool) {
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(base + "/readyz"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil, true
			}
		}
		select {
		case err := <-done:
			if err == nil {
				err = errors.New("dev stopped without an error before it was ready")
			}
			return err, false
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil, false
}
