package main

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cohort-dev/cohort/internal/testenv"
)

// TestTenantsSetAIBudget: `tenants set --ai-budget N` stores the monthly token budget, `none`
// removes it, and anything else is a usage error that changes nothing.
func TestTenantsSetAIBudget(t *testing.T) {
	dbURL := testenv.Database(t)
	t.Setenv("DATABASE_URL", dbURL)
	t.Setenv("COHORT_SECRET_KEY", testSecret)
	t.Setenv("COHORT_DATA_DIR", t.TempDir())
	if code, _, stderr := runTenantsCmd(t, "create", "--slug", "acme"); code != 0 {
		t.Fatalf("create: exit %d: %s", code, stderr)
	}
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	budget := func() *int64 {
		t.Helper()
		var b *int64
		if err := conn.QueryRow(context.Background(), `SELECT ai_monthly_token_budget FROM tenants WHERE slug = 'acme'`).Scan(&b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	code, out, stderr := runTenantsCmd(t, "set", "--slug", "acme", "--ai-budget", "500000")
	if code != 0 || !strings.Contains(out, `"ai_budget": 500000`) {
		t.Fatalf("set: exit %d, %q, %s", code, out, stderr)
	}
	if b := budget(); b == nil || *b != 500000 {
		t.Fatalf("budget %v, want 500000", b)
	}
	for _, bad := range []string{"-1", "lots", "1e6"} {
		if code, _, stderr := runTenantsCmd(t, "set", "--slug", "acme", "--ai-budget", bad); code == 0 {
			t.Errorf("--ai-budget %s accepted: %s", bad, stderr)
		}
	}
	if code, out, stderr := runTenantsCmd(t, "set", "--slug", "acme", "--ai-budget", "none"); code != 0 || !strings.Contains(out, `"ai_budget": null`) {
		t.Fatalf("set none: exit %d, %q, %s", code, out, stderr)
	}
	if b := budget(); b != nil {
		t.Fatalf("budget %v after none, want null", *b)
	}
	if code, _, _ := runTenantsCmd(t, "set", "--slug", "nobody", "--ai-budget", "5"); code == 0 {
		t.Error("unknown tenant accepted")
	}
}
