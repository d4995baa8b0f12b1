package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/internal/store"
	"github.com/cohort-dev/cohort/internal/testenv"
)

// TestTenantsSetPageLimit: cohort tenants set --page-limit N sets the tenant's page limit (alone
// or with --require-signed-user-id); bad values are usage errors that change nothing.
func TestTenantsSetPageLimit(t *testing.T) {
	dbURL := testenv.Database(t)
	t.Setenv("DATABASE_URL", dbURL)
	t.Setenv("COHORT_SECRET_KEY", testSecret)
	t.Setenv("COHORT_DATA_DIR", t.TempDir())
	if code, _, stderr := runTenantsCmd(t, "create", "--slug", "acme"); code != 0 {
		t.Fatalf("create: exit %d: %s", code, stderr)
	}
	db, err := store.Open(t.Context(), dbURL, store.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	limit := func() int64 {
		return testenv.Count(t, db, `SELECT page_limit FROM tenants WHERE slug = 'acme'`)
	}
	if n := limit(); n != 1000 {
		t.Fatalf("default page limit %d", n)
	}
	code, out, stderr := runTenantsCmd(t, "set", "--slug", "acme", "--page-limit", "2")
	if code != 0 {
		t.Fatalf("set: exit %d: %s", code, stderr)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil || res["page_limit"] != 2.0 || res["slug"] != "acme" {
		t.Fatalf("set output %q: %v", out, err)
	}
	if n := limit(); n != 2 {
		t.Fatalf("page limit %d, want 2", n)
	}
	code, out, stderr = runTenantsCmd(t, "set", "--slug", "acme", "--page-limit", "0", "--require-signed-user-id=true")
	if code != 0 || !strings.Contains(out, `"require_signed_user_id": true`) || limit() != 0 {
		t.Fatalf("set both: exit %d: %s %s (limit %d)", code, out, stderr, limit())
	}
	for _, args := range [][]string{
		{"set", "--slug", "acme", "--page-limit", "-1"},
		{"set", "--slug", "acme", "--page-limit", "many"},
		{"set", "--slug", "acme"},
	} {
		if code, _, _ := runTenantsCmd(t, args...); code == 0 {
			t.Errorf("%v succeeded", args)
		}
	}
	if code, _, _ := runTenantsCmd(t, "set", "--slug", "nobody", "--page-limit", "5"); code == 0 {
		t.Error("set on an unknown tenant succeeded")
	}
	if n := limit(); n != 0 {
		t.Fatalf("page limit %d after refused sets", n)
	}
}
