package tenant_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/auth"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/ingest/shopify"
)

// webhookHMAC is the X-Shopify-Hmac-SHA256 header a storefront sends: base64 HMAC-SHA256 of the body.
func webhookHMAC(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// TestRotateSecrets: the chosen secrets are replaced (new random values, stored sealed), the other
// one and other tenants are untouched, and the webhook verifier and the signed handshake accept
// the new values and refuse the old ones at once.
func TestRotateSecrets(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a, _ := e.authenticator(t)
	other := e.create(t, "other")
	body := []byte(`{"id":1}`)

	tests := []struct {
		name              string
		slug              string
		webhook, identity bool
	}{
		{name: "webhook only", slug: "hook", webhook: true},
		{name: "identity only", slug: "ident", identity: true},
		{name: "both", slug: "both", webhook: true, identity: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := e.create(t, tt.slug)
			e.clk.Advance(time.Minute)
			newWebhook, newIdentity, err := e.svc.RotateSecrets(ctx, tt.slug, tt.webhook, tt.identity)
			if err != nil {
				t.Fatalf("RotateSecrets: %v", err)
			}
			wantWebhook, wantIdentity := c.WebhookSecret, c.IdentitySecret
			if tt.webhook {
				if !secretRE.MatchString(newWebhook) || newWebhook == c.WebhookSecret {
					t.Fatalf("new webhook secret %q: want 64 hex digits, not the old one", newWebhook)
				}
				wantWebhook = newWebhook
			} else if newWebhook != "" {
				t.Fatalf("webhook secret not rotated, but %q returned", newWebhook)
			}
			if tt.identity {
				if !secretRE.MatchString(newIdentity) || newIdentity == c.IdentitySecret {
					t.Fatalf("new identity secret %q: want 64 hex digits, not the old one", newIdentity)
				}
				wantIdentity = newIdentity
			} else if newIdentity != "" {
				t.Fatalf("identity secret not rotated, but %q returned", newIdentity)
			}
			if tt.webhook && tt.identity && newWebhook == newIdentity {
				t.Fatal("both new secrets are the same")
			}

			// The accessors return the new value of a rotated secret and the old one of the other.
			tn, webhook, err := e.svc.WebhookSecret(ctx, tt.slug)
			if err != nil || tn.ID != c.Tenant.ID || string(webhook) != wantWebhook {
				t.Fatalf("WebhookSecret = %d %q, %v; want %d %q", tn.ID, webhook, err, c.Tenant.ID, wantWebhook)
			}
			identity, _, err := e.svc.IdentitySettings(ctx, c.Tenant.ID)
			if err != nil || string(identity) != wantIdentity {
				t.Fatalf("IdentitySettings = %q, %v; want %q", identity, err, wantIdentity)
			}
			if !tn.UpdatedAt.Equal(e.clk.Now()) {
				t.Errorf("updated_at = %v, want %v", tn.UpdatedAt, e.clk.Now())
			}

			// Webhooks: verified the way the receiver verifies them, with the secret it reads.
			if err := shopify.Verify(webhook, body, webhookHMAC(wantWebhook, body)); err != nil {
				t.Fatalf("webhook signed with the current secret: %v", err)
			}
			err = shopify.Verify(webhook, body, webhookHMAC(c.WebhookSecret, body))
			if tt.webhook && !errors.Is(err, shopify.ErrBadSignature) {
				t.Fatalf("webhook signed with the old secret = %v, want ErrBadSignature", err)
			}
			if !tt.webhook && err != nil {
				t.Fatalf("webhook signed with the unrotated secret = %v", err)
			}

			// Signed user ids: through the real handshake.
			pk, err := a.Authenticate(ctx, "ApiKey "+c.PublicKey, "", false)
			if err != nil {
				t.Fatal(err)
			}
			ts := e.clk.Now().Unix()
			handshake := func(secret string) (auth.Session, error) {
				return a.StartSession(ctx, pk, auth.SessionRequest{UserID: "u1", UserIDTs: ts, UserIDSig: auth.SignUserID([]byte(secret), "u1", ts)})
			}
			if s, err := handshake(wantIdentity); err != nil || !s.Verified {
				t.Fatalf("handshake signed with the current identity secret = %+v, %v; want verified", s, err)
			}
			s, err := handshake(c.IdentitySecret)
			if tt.identity && (!errors.Is(err, errs.ErrUnauthenticated) || !strings.Contains(err.Error(), "user_id_sig does not match")) {
				t.Fatalf("handshake signed with the old identity secret = %+v, %v; want bad signature", s, err)
			}
			if !tt.identity && (err != nil || !s.Verified) {
				t.Fatalf("handshake signed with the unrotated identity secret = %+v, %v", s, err)
			}

			// Stored sealed, bound to the row, never in plain text.
			var webhookSealed, identitySealed, row string
			if err := e.db.Pool.QueryRow(ctx,
				`SELECT webhook_secret_sealed, identity_secret_sealed, t::text FROM tenants t WHERE id = $1`, c.Tenant.ID,
			).Scan(&webhookSealed, &identitySealed, &row); err != nil {
				t.Fatal(err)
			}
			for _, sealed := range []string{webhookSealed, identitySealed} {
				if !strings.HasPrefix(sealed, "v1:"+e.box.ActiveID()+":") {
					t.Errorf("stored secret %q is not a secretbox value", sealed)
				}
			}
			for _, plain := range []string{newWebhook, newIdentity} {
				if plain != "" && strings.Contains(row, plain) {
					t.Error("tenants row contains a plaintext secret")
				}
			}
		})
	}

	// Another tenant's secrets are untouched.
	if _, webhook, err := e.svc.WebhookSecret(ctx, "other"); err != nil || string(webhook) != other.WebhookSecret {
		t.Fatalf("other's webhook secret = %q, %v; want %q", webhook, err, other.WebhookSecret)
	}
	if identity, _, err := e.svc.IdentitySettings(ctx, other.Tenant.ID); err != nil || string(identity) != other.IdentitySecret {
		t.Fatalf("other's identity secret = %q, %v; want %q", identity, err, other.IdentitySecret)
	}
}

// TestRotateSecretsErrors: an unknown tenant is not found, nothing chosen is invalid, and neither
// changes anything.
func TestRotateSecretsErrors(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.create(t, "acme")
	tests := []struct {
		name              string
		slug              string
		webhook, identity bool
		want              error
	}{
		{name: "unknown tenant", slug: "nobody", webhook: true, identity: true, want: errs.ErrNotFound},
		{name: "not a slug", slug: "Acme\x00", webhook: true, want: errs.ErrNotFound},
		{name: "empty slug", slug: "", identity: true, want: errs.ErrNotFound},
		{name: "neither secret", slug: "acme", want: errs.ErrInvalid},
		{name: "neither secret of an unknown tenant", slug: "nobody", want: errs.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, i, err := e.svc.RotateSecrets(ctx, tt.slug, tt.webhook, tt.identity)
			if !errors.Is(err, tt.want) || w != "" || i != "" {
				t.Fatalf("RotateSecrets = %q, %q, %v; want %v", w, i, err, tt.want)
			}
		})
	}
	var notFound error
	if _, err := e.svc.BySlug(ctx, "nobody"); err != nil {
		notFound = err
	}
	if _, _, err := e.svc.RotateSecrets(ctx, "nobody", true, false); notFound == nil || err == nil || err.Error() != notFound.Error() {
		t.Fatalf("RotateSecrets of an unknown tenant = %v, want BySlug's %v", err, notFound)
	}
	if _, webhook, err := e.svc.WebhookSecret(ctx, "acme"); err != nil || string(webhook) != c.WebhookSecret {
		t.Fatalf("acme's webhook secret changed: %q, %v", webhook, err)
	}
	if identity, _, err := e.svc.IdentitySettings(ctx, c.Tenant.ID); err != nil || string(identity) != c.IdentitySecret {
		t.Fatalf("acme's identity secret changed: %q, %v", identity, err)
	}
}
