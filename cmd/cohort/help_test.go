package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHelpStartsNothing: every command, tenants command and secret-key command answers -h, -help,
// --help and help with its usage on stdout and exit 0, and starts nothing: the database named is
// unreachable (a command that used it would fail) and the data dir is never created.
func TestHelpStartsNothing(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), ".cohort")
	t.Setenv("DATABASE_URL", "postgres://postgres@127.0.0.1:1/unreachable?sslmode=disable&connect_timeout=1")
	t.Setenv("COHORT_DATA_DIR", dataDir)
	t.Setenv("COHORT_HTTP_ADDR", "127.0.0.1:1")
	t.Setenv("COHORT_SECRET_KEY", "")
	t.Setenv("TEMPORAL_ADDRESS", "")

	cases := []struct {
		args []string
		want []string // in stdout
	}{
		{[]string{"--help"}, []string{"usage: cohort <command>", "NATS JetStream (embedded", "tenants", "secret-key reseal"}},
		{[]string{"-h"}, []string{"usage: cohort <command>"}},
		{[]string{"help"}, []string{"usage: cohort <command>"}},
		{[]string{"dev", "--help"}, []string{"usage: cohort dev", "NATS JetStream, embedded", "Temporal", "COHORT_DATA_DIR"}},
		{[]string{"dev", "-h"}, []string{"usage: cohort dev"}},
		{[]string{"dev", "help"}, []string{"usage: cohort dev"}},
		{[]string{"serve", "--help"}, []string{"usage: cohort serve", "DATABASE_URL", "TEMPORAL_ADDRESS"}},
		{[]string{"worker", "--help"}, []string{"usage: cohort worker", "event loader"}},
		{[]string{"migrate", "--help"}, []string{"usage: cohort migrate", "DATABASE_URL"}},
		{[]string{"tenants", "--help"}, []string{"usage: cohort tenants <command>", "create --slug S", "rotate-secrets --slug S"}},
		{[]string{"tenants", "help"}, []string{"usage: cohort tenants <command>", "revoke-tokens --slug S"}},
		{[]string{"secret-key", "--help"}, []string{"usage: cohort secret-key reseal"}},
		{[]string{"secret-key", "reseal", "--help"}, []string{"usage: cohort secret-key reseal"}},
	}
	for _, name := range []string{"create", "token", "rotate-keys", "revoke-tokens", "revoke-key", "rotate-secrets", "keys", "set"} {
		cases = append(cases,
			struct {
				args []string
				want []string
			}{[]string{"tenants", name, "--help"}, []string{"usage: cohort tenants " + name, "  " + name + " --slug S"}},
			struct {
				args []string
				want []string
			}{[]string{"tenants", name, "--slug", "acme", "-h"}, []string{"usage: cohort tenants " + name}})
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			done := make(chan int, 1)
			go func() { done <- run(tc.args, &stdout, &stderr) }()
			var code int
			select {
			case code = <-done:
			case <-time.After(20 * time.Second):
				t.Fatalf("%v still running after 20 s: it started instead of printing help", tc.args)
			}
			if code != 0 {
				t.Fatalf("exit %d, want 0; stderr: %s", code, stderr.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout.String())
				}
			}
			if strings.Contains(stdout.String(), "is running") || stderr.Len() != 0 {
				t.Errorf("something ran: stdout %q, stderr %q", stdout.String(), stderr.String())
			}
			if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the data dir was created (%v): something started", err)
			}
		})
	}
	// The top-level help no longer says dev runs Pub/Sub: its embedded bus is NATS JetStream.
	if strings.Contains(usage, "Pub/Sub and Postgres in one process") {
		t.Fatal("top-level usage still says dev runs Pub/Sub")
	}
}
