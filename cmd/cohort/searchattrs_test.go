//go:build !nodev

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/cohort-dev/cohort/internal/devstack/temporalsrv"
	"github.com/cohort-dev/cohort/internal/testenv"
	"github.com/cohort-dev/cohort/workflows/searchattr"
)

// Against a Temporal namespace without Cohort's search attributes (a fresh cluster nobody ran
// the runbook on), the API says so at start and /readyz stays unavailable, naming the command
// that fixes it; once the attributes are registered it turns ready without a restart. SIGTERM
// then stops it, logging the signal and what the HTTP server drained.
func TestReadyzUnavailableWithoutSearchAttributes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ts, err := temporalsrv.Start(ctx, temporalsrv.Options{Namespace: "bare", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("temporal: %v", err)
	}
	t.Cleanup(ts.Stop)

	apiAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	t.Setenv("DATABASE_URL", testenv.Database(t))
	t.Setenv("COHORT_SECRET_KEY", "")
	t.Setenv("COHORT_DATA_DIR", t.TempDir())
	t.Setenv("TEMPORAL_ADDRESS", ts.FrontendAddress())
	t.Setenv("TEMPORAL_NAMESPACE", "bare")
	t.Setenv("PUBSUB_PROJECT", "")
	t.Setenv("COHORT_LOG_LEVEL", "info")
	t.Setenv("COHORT_LOG_FORMAT", "json")
	t.Setenv("COHORT_HTTP_ADDR", apiAddr)
	t.Setenv("COHORT_DEV_UI_PORT", "0")

	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	exited := make(chan int, 1)
	go func() { exited <- run([]string{"dev"}, stdout, stderr) }()

	type ready struct {
		Status string            `json:"status"`
		Checks map[string]string `json:"checks"`
		Hints  map[string]string `json:"hints"`
	}
	readyz := func() (int, ready) {
		resp, err := http.Get("http://" + apiAddr + "/readyz")
		if err != nil {
			return 0, ready{}
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		var r ready
		_ = json.Unmarshal(body, &r)
		return resp.StatusCode, r
	}
	var got ready
	waitFor(t, exited, stderr, func() bool {
		var code int
		code, got = readyz()
		return code != 0 && got.Checks["temporal"] == "ok" && got.Checks["temporal_search_attributes"] != ""
	})
	if code, _ := readyz(); code != http.StatusServiceUnavailable || got.Status != "unavailable" ||
		got.Checks["temporal_search_attributes"] != "unavailable" || got.Checks["postgres"] != "ok" {
		t.Fatalf("readyz %d %+v, want 503 with temporal_search_attributes unavailable", code, got)
	}
	hint := got.Hints["temporal_search_attributes"]
	for _, want := range []string{"temporal operator search-attribute create --namespace bare --name CohortConnector --type Int",
		"--name CohortSegment", "--name CohortTenant", searchattr.Runbook} {
		if !strings.Contains(hint, want) {
			t.Errorf("hint %q lacks %q", hint, want)
		}
	}
	if logs := stderr.String(); !strings.Contains(logs, "temporal search attributes missing") || !strings.Contains(logs, "temporal operator search-attribute create") {
		t.Errorf("start-up log does not name the missing attributes and the command:\n%s", logs)
	}

	// The runbook's step, done live: ready without a restart.
	c, err := client.Dial(client.Options{HostPort: ts.FrontendAddress(), Namespace: "bare"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: "bare", SearchAttributes: searchattr.Types(),
	}); err != nil {
		t.Fatalf("add search attributes: %v", err)
	}
	waitFor(t, exited, stderr, func() bool {
		code, _ := readyz()
		return code == http.StatusOK
	})

	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-exited:
		if code != 0 {
			t.Fatalf("dev exited %d: %s", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("dev did not stop within 20s of SIGTERM")
	}
	logs := stderr.String()
	for _, want := range []string{`"msg":"signal received: stopping"`, `"signal":"terminated signal received"`,
		`"msg":"HTTP server stopped"`, `"msg":"temporal worker stopped"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("stop log lacks %s:\n%s", want, logs)
		}
	}
}
