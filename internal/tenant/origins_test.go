package tenant_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/tenant"
)

func TestNormalizeOrigin(t *testing.T) {
	ok := map[string]string{
		"https://Shop.Example":       "https://shop.example",
		"https://shop.example/":      "https://shop.example",
		" http://localhost:3000 ":    "http://localhost:3000",
		"https://shop.example:443":   "https://shop.example",
		"http://shop.example:80":     "http://shop.example",
		"http://shop.example:8080":   "http://shop.example:8080",
		"http://[::1]:5173":          "http://[::1]:5173",
		"https://xn--bcher-kva.test": "https://xn--bcher-kva.test",
	}
	for in, want := range ok {
		got, err := tenant.NormalizeOrigin(in)
		if err != nil || got != want {
			t.Errorf("NormalizeOrigin(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "shop.example", "ftp://shop.example", "https://", "https://shop.example/path",
		"https://shop.example?q", "https://user@shop.example", "https://*.shop.example", "https://shop.example:0",
		"https://shop.example:99999", "https://shop.example:x", "https://:80", "http://[::1", "http://[::1]x", "null"} {
		if got, err := tenant.NormalizeOrigin(in); err == nil {
			t.Errorf("NormalizeOrigin(%q) = %q, want an error", in, got)
		}
	}
}

func TestAllowedOrigins(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a := e.create(t, "origins-a")
	b := e.create(t, "origins-b")

	if got, err := e.svc.AllowedOrigins(ctx, a.Tenant.ID); err != nil || len(got) != 0 {
		t.Fatalf("default allowed origins %v, %v; want none", got, err)
	}
	norm, err := e.svc.SetAllowedOrigins(ctx, "origins-a", []string{"https://A.example/", "http://localhost:3000", "https://a.example"})
	want := []string{"https://a.example", "http://localhost:3000"}
	if err != nil || !slices.Equal(norm, want) {
		t.Fatalf("SetAllowedOrigins = %v, %v; want %v", norm, err, want)
	}
	if got, err := e.svc.AllowedOrigins(ctx, a.Tenant.ID); err != nil || !slices.Equal(got, want) {
		t.Fatalf("AllowedOrigins = %v, %v; want %v", got, err, want)
	}
	if got, err := e.svc.AllowedOrigins(ctx, b.Tenant.ID); err != nil || len(got) != 0 {
		t.Fatalf("other tenant's allowed origins %v, %v; want none", got, err)
	}

	var ve *errs.ValidationError
	if _, err := e.svc.SetAllowedOrigins(ctx, "origins-a", []string{"https://ok.example", "not an origin"}); !errors.As(err, &ve) || ve.Fields["allowed_origins"] == "" {
		t.Fatalf("bad origin: err = %v, want a validation error naming allowed_origins", err)
	}
	if got, _ := e.svc.AllowedOrigins(ctx, a.Tenant.ID); !slices.Equal(got, want) {
		t.Fatalf("a refused update changed the list to %v", got)
	}
	if _, err := e.svc.SetAllowedOrigins(ctx, "nobody", nil); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("unknown tenant: err = %v, want not found", err)
	}
	if _, err := e.svc.AllowedOrigins(ctx, -1); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("unknown tenant id: err = %v, want not found", err)
	}
	if norm, err := e.svc.SetAllowedOrigins(ctx, "origins-a", nil); err != nil || len(norm) != 0 {
		t.Fatalf("clear: %v, %v", norm, err)
	}
	if got, err := e.svc.AllowedOrigins(ctx, a.Tenant.ID); err != nil || len(got) != 0 {
		t.Fatalf("cleared allowed origins %v, %v; want none", got, err)
	}
}
