package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/internal/testenv"
)

// TestTenantsAllowedOrigins: set --allowed-origins normalizes and stores the list, an empty value clears it,
// and a bad origin is refused naming it.
func TestTenantsAllowedOrigins(t *testing.T) {
	t.Setenv("DATABASE_URL", testenv.Database(t))
	t.Setenv("COHORT_SECRET_KEY", testSecret)
	t.Setenv("COHORT_DATA_DIR", t.TempDir())
	if code, _, stderr := runTenantsCmd(t, "create", "--slug", "acme"); code != 0 {
		t.Fatalf("create: exit %d: %s", code, stderr)
	}
	set := func(arg string) []string {
		t.Helper()
		code, out, stderr := runTenantsCmd(t, "set", "--slug", "acme", "--allowed-origins", arg)
		if code != 0 {
			t.Fatalf("set --allowed-origins %q: exit %d: %s", arg, code, stderr)
		}
		var res struct {
			Slug           string   `json:"slug"`
			AllowedOrigins []string `json:"allowed_origins"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil || res.Slug != "acme" {
			t.Fatalf("set output %q: %v", out, err)
		}
		return res.AllowedOrigins
	}
	if got, want := set("https://A.example/, http://localhost:3000"), []string{"https://a.example", "http://localhost:3000"}; !slices.Equal(got, want) {
		t.Fatalf("allowed_origins %v, want %v", got, want)
	}
	if got := set(""); len(got) != 0 {
		t.Fatalf("allowed_origins after clearing %v, want none", got)
	}
	if code, _, stderr := runTenantsCmd(t, "set", "--slug", "acme", "--allowed-origins", "https://a.example/path"); code == 0 || !strings.Contains(stderr, "https://a.example/path") {
		t.Fatalf("bad origin: exit %d: %s", code, stderr)
	}
	if code, stdout, _ := runTenantsCmd(t, "help"); code != 0 || !strings.Contains(stdout, "--allowed-origins") {
		t.Fatalf("help does not name --allowed-origins: exit %d: %s", code, stdout)
	}
}
