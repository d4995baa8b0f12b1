package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/cohort-dev/cohort/internal/ai/openaifake"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/cohort-dev/cohort/internal/ai"
)

// The runbooks in deploy/runbooks carry their locally runnable commands in fenced ```sh blocks
// preceded by a marker line
//
//	<!-- runbook-test: NAME -->
//
// The tests below extract the blocks of one NAME (in order, joined), run them with bash, as an
// operator would paste them, against a cohort dev started in this process, and check what they
// print and what they did. So the documents and the tests cannot drift apart.

// runbookCLIEnv makes the test binary act as the cohort binary: the runbooks' shell calls
// `cohort ...`, which the script cohortOnPath writes resolves to this executable with it set.
const runbookCLIEnv = "COHORT_RUNBOOK_TEST_CLI"

func init() {
	if os.Getenv(runbookCLIEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
}

const runbookMarker = "<!-- runbook-test: "

// runbookBlocks returns the ```sh blocks of deploy/runbooks/<file> marked with name, joined.
func runbookBlocks(t *testing.T, file, name string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", "runbooks", file))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, runbookMarker) || strings.TrimSuffix(strings.TrimPrefix(line, runbookMarker), " -->") != name {
			continue
		}
		if !sc.Scan() || strings.TrimSpace(sc.Text()) != "```sh" {
			t.Fatalf("%s: marker %q is not followed by a ```sh line", file, name)
		}
		closed := false
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == "```" {
				closed = true
				break
			}
			out.WriteString(sc.Text() + "\n")
		}
		if !closed {
			t.Fatalf("%s: block %q is not closed", file, name)
		}
		n++
	}
	if n == 0 {
		t.Fatalf("%s: no block marked %q", file, name)
	}
	return out.String()
}

// runbookShell runs runbook blocks with bash in dir, with cohort on PATH and env added.
type runbookShell struct {
	dir string
	env []string
}

func newRunbookShell(t *testing.T, env map[string]string) *runbookShell {
	t.Helper()
	for _, tool := range []string{"bash", "jq", "curl", "split", "openssl", "base64"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the runbooks need %s on PATH: %v", tool, err)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	script := fmt.Sprintf("#!/bin/sh\n%s=1 exec '%s' \"$@\"\n", runbookCLIEnv, exe)
	if err := os.WriteFile(filepath.Join(bin, "cohort"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	sh := &runbookShell{dir: t.TempDir(), env: append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "COHORT_LOG_LEVEL=warn")}
	for k, v := range env {
		sh.env = append(sh.env, k+"="+v)
	}
	return sh
}

// run runs script and returns its stdout; stderr goes to the test log.
func (sh *runbookShell) run(t *testing.T, what, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir, cmd.Env = sh.dir, sh.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("%s: stdout:\n%s", what, stdout.String())
	if stderr.Len() > 0 {
		t.Logf("%s: stderr:\n%s", what, stderr.String())
	}
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return stdout.String()
}

// wantLines fails unless every line of want is a line of out.
func wantLines(t *testing.T, what, out string, want ...string) {
	t.Helper()
	have := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		have[strings.TrimSpace(l)] = true
	}
	for _, w := range want {
		if !have[w] {
			t.Errorf("%s: no line %q in the output", what, w)
		}
	}
}

// TestRunbookRotateKeys runs deploy/runbooks/rotate-keys.md: rotation with a grace period, the
// new keys and tokens working, the old keys working during the grace period, revoking them, the
// old keys, handshake and tokens refused, and a token-only revocation.
func TestRunbookRotateKeys(t *testing.T) {
	s := startDev(t)
	sh := newRunbookShell(t, map[string]string{
		"COHORT_URL": s.base, "TENANT": s.slug, "OLD_SK": s.secret, "OLD_PK": s.public, "OLD_WEBHOOK_SECRET": s.webhook,
	})
	out := sh.run(t, "rotate-keys.md", runbookBlocks(t, "rotate-keys.md", "rotate"))

	oldSK, oldPK := s.secret[:15], s.public[:15]
	wantLines(t, "rotate-keys.md", out,
		fmt.Sprintf(`{"key_id":%q,"kind":"secret","expires_at":null,"revoked_at":null}`, oldSK),
		fmt.Sprintf(`{"tenant_id":%d,"tenant_slug":%q,"credential":"secret_key","key_id":%q}`, s.tenantID, s.slug, oldSK),
		"old token: 200",
		"new pk_ handshake: 201",
		"new token: 200",
		"old sk_ during the grace period: 200",
		fmt.Sprintf(`{"key_id":%q,"revoked":true,"slug":%q}`, oldSK, s.slug),
		fmt.Sprintf(`{"key_id":%q,"revoked":true,"slug":%q}`, oldPK, s.slug),
		"old sk_: 401",
		`{"code":"unauthenticated","message":"API key revoked or expired"}`,
		"old pk_ handshake: 401",
		"new sk_: 200",
		fmt.Sprintf(`{"slug":%q,"token_generation":2,"tokens_revoked":true}`, s.slug),
		"revoked token: 401",
		"fresh token: 200",
		fmt.Sprintf(`{"slug":%q,"rotated":["webhook_secret"]}`, s.slug),
		"webhook signed with the new secret: 200",
		"webhook signed with the old secret: 401",
	)
	if !strings.Contains(out, `"tokens_revoked":true}`) || !strings.Contains(out, `"old_keys_expire_at":"`) {
		t.Errorf("rotate-keys output missing: %s", out)
	}

	// What the runbook did, checked from outside it: the rotated keys are stored and usable, the
	// old ones revoked and refused, and the token from tenants create is revoked.
	rotated, err := os.ReadFile(filepath.Join(sh.dir, "rotated.json"))
	if err != nil {
		t.Fatal(err)
	}
	var keys struct {
		SecretKey string `json:"secret_key"`
		PublicKey string `json:"public_key"`
	}
	if err := json.Unmarshal(rotated, &keys); err != nil || !strings.HasPrefix(keys.SecretKey, "sk_") || !strings.HasPrefix(keys.PublicKey, "pk_") {
		t.Fatalf("rotated.json: %s (%v)", rotated, err)
	}
	var who map[string]any
	if code := s.do(t, "GET", "/api/auth/whoami/", "ApiKey "+keys.SecretKey, nil, nil, &who); code != 200 || who["key_id"] != keys.SecretKey[:15] {
		t.Errorf("whoami with the new key: %d %v", code, who)
	}
	if code := s.do(t, "GET", "/api/auth/whoami/", "ApiKey "+s.secret, nil, nil, nil); code != 401 {
		t.Errorf("whoami with the old key: %d, want 401", code)
	}
	if code := s.do(t, "GET", "/api/auth/whoami/", "Bearer "+s.token, nil, nil, nil); code != 401 {
		t.Errorf("whoami with the token from tenants create: %d, want 401", code)
	}
	n := countRows(t, s.dbURL, `SELECT count(*) FROM api_keys WHERE tenant_id = $1 AND key_id = ANY($2) AND revoked_at IS NOT NULL`,
		s.tenantID, []string{oldSK, oldPK})
	if n != 2 {
		t.Errorf("%d of the old keys are revoked in the database, want 2", n)
	}
}

// TestRunbookBackfillEvents runs deploy/runbooks/backfill-events.md on an export in the shape
// its BigQuery query writes, twice, and checks that the tenant holds each distinct event exactly
// once with its original id, time and payload.
func TestRunbookBackfillEvents(t *testing.T) {
	s := startDev(t)
	sh := newRunbookShell(t, map[string]string{"COHORT_URL": s.base, "TENANT": s.slug, "SK": s.secret})

	// 1,200 distinct events of 40 users, then one exported twice, then one with a bad event type.
	const distinct, users = 1200, 40
	base := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	var export bytes.Buffer
	line := func(id, user, typ string, at time.Time, amount int) {
		payload, _ := json.Marshal(map[string]any{"amount": amount, "currency": "EUR"})
		row, _ := json.Marshal(map[string]any{
			"message_id": id, "user_id": user, "event_type": typ,
			"occurred_at": at.Format("2006-01-02T15:04:05.000000Z"), "payload": string(payload),
		})
		export.Write(append(row, '\n'))
	}
	for i := range distinct {
		typ := "page_viewed"
		if i%3 == 0 {
			typ = "order_completed"
		}
		line(fmt.Sprintf("bq-%05d", i), fmt.Sprintf("user-%02d", i%users), typ, base.Add(time.Duration(i)*time.Minute), i)
	}
	line("bq-00010", "user-10", "page_viewed", base.Add(10*time.Minute), 10)
	line("bq-bad", "user-01", "Order Completed", base, 1)
	if err := os.WriteFile(filepath.Join(sh.dir, "export.ndjson"), export.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	replay := runbookBlocks(t, "backfill-events.md", "backfill-replay")
	loaded := func(want float64) {
		t.Helper()
		eventually(t, fmt.Sprintf("the loader to take %v events", want), func() bool {
			_, fams := scrape(t, s.base+"/metrics")
			fam := fams["cohort_loader_batch_events"]
			if fam == nil || len(fam.GetMetric()) == 0 {
				return false
			}
			return fam.GetMetric()[0].GetHistogram().GetSampleSum() >= want
		})
	}
	for i, want := range []float64{distinct + 1, 2 * (distinct + 1)} {
		what := fmt.Sprintf("backfill-events.md replay, run %d", i+1)
		out := sh.run(t, what, replay)
		wantLines(t, what, out,
			`{"requests":3,"queued":1201,"skipped":1}`,
			`{"file":"batches/b.000002","errors":[{"index":201,"code":"invalid_event_type","message":"event_type: must be snake_case: a lowercase letter, then up to 127 of a-z, 0-9, _"}]}`,
		)
		if strings.Contains(out, "FAILED") {
			t.Fatalf("%s: %s", what, out)
		}
		loaded(want)
	}

	out := sh.run(t, "backfill-events.md verify", runbookBlocks(t, "backfill-events.md", "backfill-verify"))
	wantLines(t, "backfill-events.md verify", out,
		fmt.Sprintf(`{"total_events":%d,"unique_users":%d}`, distinct, users),
		fmt.Sprintf("cohort_loader_batch_events_sum %d", 2*(distinct+1)),
		fmt.Sprintf("cohort_loader_events_stored_total %d", distinct),
	)

	// Exactly once, with the original ids, times and payloads.
	if n := countRows(t, s.dbURL, `SELECT count(*) FROM warehouse.events WHERE tenant_id = $1`, s.tenantID); n != distinct {
		t.Errorf("warehouse.events holds %d rows of the tenant, want %d", n, distinct)
	}
	if n := countRows(t, s.dbURL, `SELECT count(DISTINCT event_id) FROM warehouse.events WHERE tenant_id = $1 AND event_id LIKE 'bq-%'`, s.tenantID); n != distinct {
		t.Errorf("%d distinct original ids stored, want %d", n, distinct)
	}
	ctx := context.Background()
	c, err := pgx.Connect(ctx, s.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close(ctx) }()
	var at time.Time
	var user, typ string
	var amount int
	err = c.QueryRow(ctx, `SELECT occurred_at, user_id, event_type, (payload->>'amount')::int FROM warehouse.events
		WHERE tenant_id = $1 AND event_id = 'bq-00999'`, s.tenantID).Scan(&at, &user, &typ, &amount)
	if err != nil {
		t.Fatal(err)
	}
	if !at.Equal(base.Add(999*time.Minute)) || user != "user-39" || typ != "order_completed" || amount != 999 {
		t.Errorf("bq-00999 stored as %v %s %s amount %d", at, user, typ, amount)
	}
}

// TestRunbookAIProviderOutage runs deploy/runbooks/ai-provider-outage.md against a cohort dev
// whose AI provider (COHORT_AI_PROVIDER=openai) is an OpenAI-compatible server in this process.
// With the provider up, 5 products are embedded and a page is generated. The provider then
// answers 503 to everything: 20 products saved meanwhile stay queued and a search answers 503
// embedding_unavailable; the diagnosis block names the provider's 503, the failed embedding
// calls, the search 503 and the tenant's backlog. The page is set to error in SQL, as a
// generation that failed during the outage leaves it (a real one fails only after 10 minutes of
// retries). The provider comes back and the recovery block waits for the backlog to drain,
// searches, and regenerates the page, which becomes ready with a new version.
func TestRunbookAIProviderOutage(t *testing.T) {
	fake := &openaifake.Server{}
	provider := httptest.NewServer(fake)
	t.Cleanup(provider.Close)
	const apiKey = "sk-runbook-test"
	s := startDevWith(t, map[string]string{
		"COHORT_AI_PROVIDER": "openai", "OPENAI_BASE_URL": provider.URL + "/v1", "OPENAI_API_KEY": apiKey,
		"OPENAI_EMBEDDING_DIMENSIONS": "64",
	}, nil)
	auth := "ApiKey " + s.secret
	key := map[string]string{"X-API-Key": s.secret}
	if code := s.do(t, http.MethodPut, "/api/pim/schema/", "", []byte(`{"fields":[{"name":"category","type":"string","searchable":true},
		{"name":"price","type":"price"}]}`), key, nil); code != http.StatusOK {
		t.Fatalf("schema: %d", code)
	}
	saveProducts := func(prefix string, n int) {
		t.Helper()
		items := make([]string, n)
		for i := range items {
			items[i] = fmt.Sprintf(`{"sku":"%s-%d","name":"%s summer dress %d","category":"dress","price":%d}`, prefix, i, prefix, i, 30+i)
		}
		var sum struct{ Created int }
		if code := s.do(t, http.MethodPost, "/api/pim/products/bulk/", "", []byte(`{"products":[`+strings.Join(items, ",")+`]}`), key, &sum); code != http.StatusOK || sum.Created != n {
			t.Fatalf("bulk %s: %d %+v", prefix, code, sum)
		}
	}
	queued := func() int {
		return countRows(t, s.dbURL, `SELECT count(*) FROM product_embedding_queue WHERE tenant_id = $1`, s.tenantID)
	}
	type pageState struct {
		ID      int64  `json:"id"`
		Status  string `json:"status"`
		Version int    `json:"version"`
	}
	getPage := func(id int64) pageState {
		var p pageState
		s.do(t, http.MethodGet, fmt.Sprintf("/api/ai-pages/pages/%d/", id), auth, nil, nil, &p)
		return p
	}

	// Up: products embedded, a page generated through the provider's chat.
	saveProducts("linen", 5)
	eventually(t, "the first products embedded", func() bool { return queued() == 0 })
	var q struct {
		ID int64 `json:"id"`
	}
	if code := s.do(t, http.MethodPost, "/api/ai-pages/queries/", auth, []byte(`{"text":"linen summer dresses"}`), nil, &q); code != http.StatusCreated {
		t.Fatalf("query: %d", code)
	}
	var pg pageState
	if code := s.do(t, http.MethodPost, "/api/ai-pages/pages/", auth, []byte(fmt.Sprintf(`{"query":%d}`, q.ID)), nil, &pg); code != http.StatusCreated {
		t.Fatalf("page: %d", code)
	}
	eventually(t, "the page generated", func() bool { p := getPage(pg.ID); pg.Version = p.Version; return p.Status == "ready" })

	// Down: new products wait, searches answer 503.
	fake.Down.Store(true)
	saveProducts("cotton", 20)
	eventually(t, "an embedding call refused by the provider", func() bool {
		_, fams := scrape(t, s.base+"/metrics")
		for _, m := range fams["cohort_ai_requests_total"].GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["operation"] == ai.OpEmbed && labels["outcome"] == ai.OutcomeUnavailable && m.GetCounter().GetValue() > 0 {
				return true
			}
		}
		return false
	})
	var searchErr struct {
		Error struct{ Code string } `json:"error"`
	}
	if code := s.do(t, http.MethodGet, "/api/ai-pages/query?q=dress", auth, nil, nil, &searchErr); code != http.StatusServiceUnavailable || searchErr.Error.Code != "embedding_unavailable" {
		t.Fatalf("search during the outage: %d %+v, want 503 embedding_unavailable", code, searchErr)
	}
	sh := newRunbookShell(t, map[string]string{
		"COHORT_URL": s.base, "SK": s.secret, "METRICS_URL": s.base + "/metrics", "DATABASE_URL": s.dbURL,
		"OPENAI_BASE_URL": provider.URL + "/v1", "OPENAI_API_KEY": apiKey,
	})
	out := sh.run(t, "ai-provider-outage.md diagnose", runbookBlocks(t, "ai-provider-outage.md", "ai-outage-diagnose"))
	wantLines(t, "ai-provider-outage.md diagnose", out,
		"provider: 503",
		`cohort_search_unavailable_total{reason="embedding_unavailable"} 1`,
	)
	if !strings.Contains(out, `cohort_ai_requests_total{operation="embed",outcome="unavailable",provider="openai"} `) {
		t.Errorf("diagnose: no failed embedding calls in %q", out)
	}
	if !strings.Contains(out, "\n"+s.slug+" 20 0 ") {
		t.Errorf("diagnose: no backlog line %q in %q", s.slug+" 20 0 <seconds>", out)
	}
	db, err := pgx.Connect(context.Background(), s.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.Exec(context.Background(), `UPDATE generated_pages SET status = 'error', last_error = 'page copy: ai provider unavailable' WHERE id = $1`, pg.ID)
	_ = db.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}

	// Back up: the recovery block drains, searches and regenerates.
	fake.Down.Store(false)
	out = sh.run(t, "ai-provider-outage.md recover", runbookBlocks(t, "ai-provider-outage.md", "ai-outage-recover"))
	wantLines(t, "ai-provider-outage.md recover", out,
		"provider: 200",
		"waiting embeddings: 0",
		"search: 200",
		`{"match_count":1,"pending_embeddings":0}`,
		"pages in error: 1",
		fmt.Sprintf("regenerate %d: 202", pg.ID),
	)
	if n := queued(); n != 0 {
		t.Errorf("%d products still queued after the recovery block", n)
	}
	eventually(t, "the regenerated page ready with a new version", func() bool {
		p := getPage(pg.ID)
		return p.Status == "ready" && p.Version > pg.Version
	})

	// The families the alerts read are exported by the dev (worker and API in one process), with
	// what happened, and promlint (promtool check metrics) finds no problem with them.
	text, fams := scrape(t, s.base+"/metrics")
	for _, c := range []struct {
		name   string
		labels map[string]string
		min    float64
	}{
		{"cohort_page_generations_total", map[string]string{"outcome": "ok"}, 2},
		{"cohort_search_unavailable_total", map[string]string{"reason": "embedding_unavailable"}, 1},
		{"cohort_ai_requests_total", map[string]string{"operation": ai.OpEmbed, "outcome": ai.OutcomeOK}, 2},
		{"cohort_ai_requests_total", map[string]string{"operation": ai.OpChatStream, "outcome": ai.OutcomeOK}, 2}, // page copy streams
		{"cohort_ai_request_duration_seconds", map[string]string{"operation": ai.OpChatStream}, 2},
	} {
		if got := value(fams, c.name, c.labels); got < c.min {
			t.Errorf("%s%v = %v, want at least %v", c.name, c.labels, got, c.min)
		}
	}
	for _, name := range []string{"cohort_embedding_backlog_products", "cohort_embedding_backlog_age_seconds", "cohort_page_builds_total", "cohort_segment_exports_total"} {
		if fams[name] == nil {
			t.Errorf("family %s missing", name)
		}
	}
	problems, err := promlint.New(strings.NewReader(text)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}
