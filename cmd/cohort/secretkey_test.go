package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/config"
	"github.com/cohort-dev/cohort/internal/connector"
	"github.com/cohort-dev/cohort/internal/testenv"
)

// The whole rotation of COHORT_SECRET_KEY on one database, as the runbook does it: secrets and
// tokens made under key A; every process restarted with B and A as previous (starts, opens A's
// secrets, accepts A's tokens); `cohort secret-key reseal`; then B alone opens everything and
// A is refused.
func TestSecretKeyRotation(t *testing.T) {
	ctx := context.Background()
	keyA, keyB := strings.Repeat("a", 40), strings.Repeat("b", 40)
	dbURL := testenv.Database(t)
	t.Setenv("DATABASE_URL", dbURL)
	t.Setenv("COHORT_DATA_DIR", filepath.Join(t.TempDir(), ".cohort"))
	t.Setenv("COHORT_SECRET_KEY", keyA)
	t.Setenv("COHORT_SECRET_KEY_PREVIOUS", "")

	code, out, stderr := runTenantsCmd(t, "create", "--slug", "acme")
	if code != 0 {
		t.Fatalf("create: exit %d: %s", code, stderr)
	}
	var created struct {
		ID            int64  `json:"id"`
		Token         string `json:"token"`
		WebhookSecret string `json:"webhook_secret"`
	}
	if err := json.Unmarshal([]byte(out), &created); err != nil {
		t.Fatal(err)
	}
	// open is a core as any role opens it with the environment's keys.
	open := func() (*core, error) {
		cfg, err := config.Load(os.LookupEnv)
		if err != nil {
			t.Fatal(err)
		}
		return openCore(ctx, cfg, slog.New(slog.DiscardHandler), coreOptions{})
	}
	mustOpen := func() *core {
		t.Helper()
		c, err := open()
		if err != nil {
			t.Fatalf("open with COHORT_SECRET_KEY=%.1s… previous=%.1s…: %v", os.Getenv("COHORT_SECRET_KEY"), os.Getenv("COHORT_SECRET_KEY_PREVIOUS"), err)
		}
		t.Cleanup(c.close)
		return c
	}
	connectors := func(c *core) *connector.Service {
		return connector.NewService(c.db.Gorm, c.db.Pool, c.box, time.Now, connector.Options{})
	}
	c := mustOpen()
	var seg int64
	if err := c.db.Pool.QueryRow(ctx, `INSERT INTO segments (tenant_id, name, segment_type, status) VALUES ($1, 'vip', 'rule', 'ready') RETURNING id`, created.ID).Scan(&seg); err != nil {
		t.Fatal(err)
	}
	conn, err := connectors(c).Create(ctx, created.ID, connector.CreateInput{SegmentID: &seg, Kind: "talon_one", Name: "T",
		Config: json.RawMessage(`{"base_url":"https://x.talon.one","api_key":"t1-key-0123","audience_id":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	// check: what every process must be able to do with the keys it runs with.
	check := func(c *core, tokenOK bool) {
		t.Helper()
		creds, err := connectors(c).Credentials(ctx, created.ID, conn.ID)
		if err != nil || creds.Secrets["api_key"] != "t1-key-0123" {
			t.Fatalf("connector key: %v, %v", creds, err)
		}
		if _, secret, err := c.tenants.WebhookSecret(ctx, "acme"); err != nil || string(secret) != created.WebhookSecret {
			t.Fatalf("webhook secret: %v", err)
		}
		if _, err := c.signer.Verify(created.Token); (err == nil) != tokenOK {
			t.Fatalf("token minted with key A: verify err %v, want ok %v", err, tokenOK)
		}
	}
	check(c, true)

	// B without A: refused at start (the database's secrets are A's).
	t.Setenv("COHORT_SECRET_KEY", keyB)
	if _, err := open(); err == nil || !strings.Contains(err.Error(), "another secret key") {
		t.Fatalf("new key alone before the reseal: %v, want a key mismatch", err)
	}
	// B with A as previous: every role starts, reads A's secrets and accepts A's tokens.
	t.Setenv("COHORT_SECRET_KEY_PREVIOUS", keyA)
	check(mustOpen(), true)

	var stdout, errb bytes.Buffer
	if code := run([]string{"secret-key", "reseal"}, &stdout, &errb); code != 0 {
		t.Fatalf("reseal: exit %d: %s", code, errb.String())
	}
	var res struct {
		Resealed map[string]int `json:"resealed"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("reseal output %q: %v", stdout.String(), err)
	}
	if res.Resealed["tenant_secrets"] != 2 || res.Resealed["connector_secrets"] != 1 {
		t.Fatalf("resealed %v, want 2 tenant secrets and 1 connector secret", res.Resealed)
	}
	if strings.Contains(stdout.String(), keyA) || strings.Contains(stdout.String(), keyB) || strings.Contains(stdout.String(), "t1-key-0123") {
		t.Fatalf("reseal printed a secret: %s", stdout.String())
	}
	stdout.Reset()
	if code := run([]string{"secret-key", "reseal"}, &stdout, io.Discard); code != 0 || !strings.Contains(stdout.String(), `"connector_secrets": 0`) {
		t.Fatalf("second reseal: exit %d, %s; want nothing re-encrypted", code, stdout.String())
	}

	// After the grace period: B alone opens everything; A's tokens are refused (they would
	// have expired by then); A alone no longer starts.
	t.Setenv("COHORT_SECRET_KEY_PREVIOUS", "")
	check(mustOpen(), false)
	t.Setenv("COHORT_SECRET_KEY", keyA)
	if _, err := open(); err == nil || !strings.Contains(err.Error(), "another secret key") {
		t.Fatalf("old key after the reseal: %v, want a key mismatch", err)
	}

	// Usage errors.
	for _, args := range [][]string{{"secret-key"}, {"secret-key", "rotate"}} {
		if code := run(args, io.Discard, io.Discard); code != 2 {
			t.Fatalf("%v: exit %d, want 2", args, code)
		}
	}
}
