package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/internal/testenv"
)

// TestTenantsBlockedAICrawlers: set --blocked-ai-crawlers stores the known crawlers in their
// spelling, an empty value allows every crawler again, and an unknown name is refused naming it.
func TestTenantsBlockedAICrawlers(t *testing.T) {
	t.Setenv("DATABASE_URL", testenv.Database(t))
	t.Setenv("COHORT_SECRET_KEY", testSecret)
	t.Setenv("COHORT_DATA_DIR", t.TempDir())
	if code, _, stderr := runTenantsCmd(t, "create", "--slug", "acme"); code != 0 {
		t.Fatalf("create: exit %d: %s", code, stderr)
	}
	set := func(arg string) []string {
		t.Helper()
		code, out, stderr := runTenantsCmd(t, "set", "--slug", "acme", "--blocked-ai-crawlers", arg)
		if code != 0 {
			t.Fatalf("set --blocked-ai-crawlers %q: exit %d: %s", arg, code, stderr)
		}
		var res struct {
			Slug    string   `json:"slug"`
			Blocked []string `json:"blocked_ai_crawlers"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil || res.Slug != "acme" {
			t.Fatalf("set output %q: %v", out, err)
		}
		return res.Blocked
	}
	for _, tc := range []struct {
		name, arg string
		want      []string
	}{
		{"two, any case and spacing", "ccbot, GPTBot", []string{"GPTBot", "CCBot"}},
		{"cleared", "", []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := set(tc.arg); !slices.Equal(got, tc.want) {
				t.Fatalf("blocked %v, want %v", got, tc.want)
			}
		})
	}
	if code, _, stderr := runTenantsCmd(t, "set", "--slug", "acme", "--blocked-ai-crawlers", "GPTBot,NoSuchBot"); code == 0 || !strings.Contains(stderr, "NoSuchBot") {
		t.Fatalf("unknown crawler: exit %d: %s", code, stderr)
	}
	if code, stdout, _ := runTenantsCmd(t, "help"); code != 0 || !strings.Contains(stdout, "--blocked-ai-crawlers") {
		t.Fatalf("help does not name --blocked-ai-crawlers: exit %d: %s", code, stdout)
	}
}
