package main

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/ingest/shopify"
	"github.com/cohort-dev/cohort/internal/secretbox"
	"github.com/cohort-dev/cohort/internal/store"
	"github.com/cohort-dev/cohort/internal/tenant"
	"github.com/cohort-dev/cohort/internal/testenv"
)

// tenantServiceFor is the tenant service a server started with secret would use over the database.
func tenantServiceFor(t *testing.T, dbURL, secret string) *tenant.Service {
	t.Helper()
	db, err := store.Open(context.Background(), dbURL, store.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	boxKey := secretbox.DeriveKey([]byte(secret), purposeSecretBox)
	box, err := secretbox.New(map[string][]byte{secretbox.KeyID(boxKey): boxKey}, secretbox.KeyID(boxKey))
	if err != nil {
		t.Fatal(err)
	}
	return tenant.NewService(db.Gorm, box, time.Now)
}

// TestTenantsRotateSecrets: rotate-secrets prints only the secrets it replaced (--webhook,
// --identity, neither flag: both), the webhook verifier refuses the old webhook secret and takes
// the new one at once, the other secret is untouched, and bad input is refused.
func TestTenantsRotateSecrets(t *testing.T) {
	dbURL := testenv.Database(t)
	t.Setenv("DATABASE_URL", dbURL)
	t.Setenv("COHORT_SECRET_KEY", testSecret)
	t.Setenv("COHORT_DATA_DIR", t.TempDir())
	svc := tenantServiceFor(t, dbURL, testSecret)
	ctx := context.Background()
	hexSecret := regexp.MustCompile(`^[0-9a-f]{64}$`)

	code, out, stderr := runTenantsCmd(t, "create", "--slug", "acme")
	if code != 0 {
		t.Fatalf("create: exit %d: %s", code, stderr)
	}
	var created struct {
		ID             int64  `json:"id"`
		WebhookSecret  string `json:"webhook_secret"`
		IdentitySecret string `json:"identity_secret"`
	}
	if err := json.Unmarshal([]byte(out), &created); err != nil {
		t.Fatal(err)
	}
	webhook, identity := created.WebhookSecret, created.IdentitySecret

	rotate := func(args ...string) map[string]any {
		t.Helper()
		code, out, stderr := runTenantsCmd(t, append([]string{"rotate-secrets"}, args...)...)
		if code != 0 {
			t.Fatalf("rotate-secrets %v: exit %d: %s", args, code, stderr)
		}
		var res map[string]any
		dec := json.NewDecoder(strings.NewReader(out))
		if err := dec.Decode(&res); err != nil || dec.More() {
			t.Fatalf("rotate-secrets %v output %q is not one JSON object: %v", args, out, err)
		}
		if res["slug"] != "acme" {
			t.Fatalf("rotate-secrets %v output %v: slug", args, res)
		}
		return res
	}
	// check compares the output with the rotated secrets wanted, and the stored secrets with the
	// expected ones; it returns the current webhook and identity secrets.
	check := func(res map[string]any, wantRotated []string) (string, string) {
		t.Helper()
		var rotated []string
		list, _ := res["rotated"].([]any)
		for _, r := range list {
			s, _ := r.(string)
			rotated = append(rotated, s)
		}
		if !slices.Equal(rotated, wantRotated) {
			t.Fatalf("rotated = %v, want %v (output %v)", res["rotated"], wantRotated, res)
		}
		if len(res) != 2+len(wantRotated) {
			t.Fatalf("output %v has other fields than slug, rotated and the rotated secrets", res)
		}
		newWebhook, newIdentity := webhook, identity
		for _, r := range wantRotated {
			s, _ := res[r].(string)
			if !hexSecret.MatchString(s) || s == webhook || s == identity {
				t.Fatalf("%s = %q: want a new 64 hex digit secret", r, res[r])
			}
			if r == "webhook_secret" {
				newWebhook = s
			} else {
				newIdentity = s
			}
		}
		tn, stored, err := svc.WebhookSecret(ctx, "acme")
		if err != nil || string(stored) != newWebhook {
			t.Fatalf("stored webhook secret = %q, %v; want %q", stored, err, newWebhook)
		}
		body := []byte(`{"id":820982911946154508}`)
		if err := shopify.Verify(stored, body, shopifySign(newWebhook, body)); err != nil {
			t.Fatalf("webhook signed with the current secret: %v", err)
		}
		if newWebhook != webhook {
			if err := shopify.Verify(stored, body, shopifySign(webhook, body)); !errors.Is(err, shopify.ErrBadSignature) {
				t.Fatalf("webhook signed with the old secret = %v, want ErrBadSignature", err)
			}
		}
		storedIdentity, _, err := svc.IdentitySettings(ctx, tn.ID)
		if err != nil || string(storedIdentity) != newIdentity {
			t.Fatalf("stored identity secret = %q, %v; want %q", storedIdentity, err, newIdentity)
		}
		return newWebhook, newIdentity
	}

	webhook, identity = check(rotate("--slug", "acme", "--webhook"), []string{"webhook_secret"})
	webhook, identity = check(rotate("--tenant", "acme", "--identity"), []string{"identity_secret"})
	webhook, identity = check(rotate("--slug", "acme"), []string{"webhook_secret", "identity_secret"})
	webhook, identity = check(rotate("--slug", "acme", "--webhook", "--identity"), []string{"webhook_secret", "identity_secret"})
	webhook, identity = check(rotate("--slug", "acme", "--webhook=true", "--identity=false"), []string{"webhook_secret"})

	for _, tt := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{name: "unknown tenant", args: []string{"--slug", "nobody"}, code: 1, want: "nobody"},
		{name: "no slug", args: []string{"--webhook"}, code: 2, want: "--slug is required"},
		{name: "both flags false", args: []string{"--slug", "acme", "--webhook=false", "--identity=false"}, code: 2, want: "nothing to rotate"},
		{name: "bad flag value", args: []string{"--slug", "acme", "--webhook=maybe"}, code: 2, want: "webhook"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out, stderr := runTenantsCmd(t, append([]string{"rotate-secrets"}, tt.args...)...)
			if code != tt.code || out != "" || !strings.Contains(stderr, tt.want) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d and %q", code, out, stderr, tt.code, tt.want)
			}
		})
	}
	// The refused runs changed nothing.
	check(map[string]any{"slug": "acme", "rotated": []any{}}, nil)

	if code, out, stderr := runTenantsCmd(t, "help"); code != 0 || !strings.Contains(out, "rotate-secrets --slug S") {
		t.Fatalf("help: exit %d, want 0 and the usage naming rotate-secrets on stdout: %s %s", code, out, stderr)
	}
}
