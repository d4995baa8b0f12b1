package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/internal/testenv"
)

// TestTenantsSetLists: the list settings of `tenants set` store what they are given in its
// canonical form, an empty value clears the list, a bad entry is refused naming it, and help names
// the flag. --allowed-origins normalizes origins; --blocked-ai-crawlers takes the crawlers the
// product knows, in their spelling, whatever the case and spacing.
func TestTenantsSetLists(t *testing.T) {
	t.Setenv("DATABASE_URL", testenv.Database(t))
	t.Setenv("COHORT_SECRET_KEY", testSecret)
	t.Setenv("COHORT_DATA_DIR", t.TempDir())
	if code, _, stderr := runTenantsCmd(t, "create", "--slug", "acme"); code != 0 {
		t.Fatalf("create: exit %d: %s", code, stderr)
	}
	for _, tc := range []struct {
		flag, field   string
		arg           string
		want          []string
		bad, badNamed string
	}{
		{"--allowed-origins", "allowed_origins", "https://A.example/, http://localhost:3000",
			[]string{"https://a.example", "http://localhost:3000"}, "https://a.example/path", "https://a.example/path"},
		{"--blocked-ai-crawlers", "blocked_ai_crawlers", "ccbot, GPTBot",
			[]string{"GPTBot", "CCBot"}, "GPTBot,NoSuchBot", "NoSuchBot"},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			set := func(arg string) []string {
				t.Helper()
				code, out, stderr := runTenantsCmd(t, "set", "--slug", "acme", tc.flag, arg)
				if code != 0 {
					t.Fatalf("set %s %q: exit %d: %s", tc.flag, arg, code, stderr)
				}
				var res map[string]json.RawMessage
				var list []string
				if err := json.Unmarshal([]byte(out), &res); err != nil || string(res["slug"]) != `"acme"` {
					t.Fatalf("set output %q: %v", out, err)
				}
				if err := json.Unmarshal(res[tc.field], &list); err != nil {
					t.Fatalf("set output %q: %s: %v", out, tc.field, err)
				}
				return list
			}
			if got := set(tc.arg); !slices.Equal(got, tc.want) {
				t.Fatalf("%s %v, want %v", tc.field, got, tc.want)
			}
			if got := set(""); len(got) != 0 {
				t.Fatalf("%s after clearing %v, want none", tc.field, got)
			}
			if code, _, stderr := runTenantsCmd(t, "set", "--slug", "acme", tc.flag, tc.bad); code == 0 || !strings.Contains(stderr, tc.badNamed) {
				t.Fatalf("bad value %q: exit %d: %s", tc.bad, code, stderr)
			}
			if code, stdout, _ := runTenantsCmd(t, "help"); code != 0 || !strings.Contains(stdout, tc.flag) {
				t.Fatalf("help does not name %s: exit %d: %s", tc.flag, code, stdout)
			}
		})
	}
}
