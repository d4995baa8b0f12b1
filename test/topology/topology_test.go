//go:build topology

// Package topology runs Cohort as a replicated deployment would: two `cohort serve` and two
// `cohort worker` processes (one binary, built once) against NATS JetStream and a Temporal server,
// each its own process, and Postgres; then kills processes while work is in flight and checks
// what a user can observe. It is a nightly-style test (minutes, not part of `task test`):
//
//	go tool -modfile=tools/go.mod task test:topology
//
// It needs /usr/sbin/nats-server (or nats-server on PATH). The Temporal server is this module's
// (./temporalserver, built by the test); the temporal CLI runs the runbook's commands against it
// and is installed once with `go install github.com/temporalio/cli/cmd/temporal@v1.5.1` into the
// user cache (COHORT_TEMPORAL_CLI names an existing binary instead).
package topology

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/cohort-dev/cohort/internal/ai/openaifake"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/cohort-dev/cohort/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const temporalCLIVersion = "v1.5.1"

// proc is one child process of the topology, restartable with the same settings.
type proc struct {
	name   string
	bin    string
	args   []string
	env    []string
	logDir string

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan error
	logPath string
	starts  int
}

func (p *proc) start(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.starts++
	p.logPath = filepath.Join(p.logDir, fmt.Sprintf("%s.%d.log", p.name, p.starts))
	f, err := os.Create(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", p.name, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); _ = f.Close() }()
	p.cmd, p.exited = cmd, exited
}

// signal sends sig and, unless it is nil, waits up to wait for the exit.
func (p *proc) stop(t *testing.T, sig syscall.Signal, wait time.Duration) time.Duration {
	t.Helper()
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	began := time.Now()
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%s: signal %v: %v", p.name, sig, err)
	}
	select {
	case err := <-exited:
		if sig == syscall.SIGTERM && err != nil {
			t.Errorf("%s exited with %v after SIGTERM, want a clean exit\n%s", p.name, err, p.tail(30))
		}
	case <-time.After(wait):
		t.Fatalf("%s still running %v after %v", p.name, wait, sig)
	}
	return time.Since(began)
}

func (p *proc) alive() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case err := <-p.exited:
		p.exited <- err
		return false
	default:
		return true
	}
}

func (p *proc) log() string {
	p.mu.Lock()
	path := p.logPath
	p.mu.Unlock()
	b, _ := os.ReadFile(path)
	return string(b)
}

func (p *proc) tail(n int) string {
	lines := strings.Split(strings.TrimRight(p.log(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func (p *proc) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Kill()
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// waitUntil polls cond every 50 ms until it holds or d passes; it reports whether it held.
func waitUntil(d time.Duration, cond func() bool) bool {
	return waitEvery(d, 50*time.Millisecond, cond)
}

// waitEvery polls cond every interval until it holds or d passes; it reports whether it held.
func waitEvery(d, interval time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(interval)
	}
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// temporalCLI returns the temporal CLI: COHORT_TEMPORAL_CLI, else the copy cached next to the Go
// build cache, installed there on first use.
func temporalCLI(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("COHORT_TEMPORAL_CLI"); p != "" {
		return p
	}
	out, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(filepath.Dir(strings.TrimSpace(string(out))), "cohort-temporal-cli", temporalCLIVersion)
	bin := filepath.Join(dir, "temporal")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	t.Logf("installing the temporal CLI %s into %s (once; takes minutes)", temporalCLIVersion, dir)
	cmd := exec.Command("go", "install", "github.com/temporalio/cli/cmd/temporal@"+temporalCLIVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("install the temporal CLI: %v\n%s", err, out)
	}
	return bin
}

func natsServer(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("nats-server"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/nats-server"); err == nil {
		return "/usr/sbin/nats-server"
	}
	t.Skip("nats-server not installed (apt-get install nats-server)")
	return ""
}

// topo is the running topology.
type topo struct {
	t        *testing.T
	bin      string
	dbURL    string
	pool     *pgxpool.Pool
	temporal string
	tc       client.Client
	apis     [2]*proc
	apiBase  [2]string
	workers  [2]*proc
	tenantID int64
	secret   string
	token    string // the tenant's bearer token (segments)
	slug     string
	model    *openaifake.Server
	http     *http.Client
}

func startTopology(t *testing.T) *topo {
	t.Helper()
	root := moduleRoot(t)
	tmp := t.TempDir()
	logDir := filepath.Join(tmp, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	tp := &topo{t: t, slug: "shop", http: &http.Client{Timeout: 30 * time.Second}}
	var all []*proc
	t.Cleanup(func() {
		for _, p := range all {
			p.kill()
		}
		if t.Failed() {
			for _, p := range all {
				t.Logf("--- last lines of %s (%s)\n%s", p.name, p.logPath, p.tail(40))
			}
		}
	})

	// The binary, built once.
	tp.bin = filepath.Join(tmp, "cohort")
	began := time.Now()
	build := exec.Command("go", "build", "-o", tp.bin, "./cmd/cohort")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Logf("built cohort in %v", time.Since(began).Round(time.Millisecond))
	baseEnv := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir()}

	// NATS JetStream, its own process and storage.
	natsPort := freePort(t)
	nats := &proc{name: "nats", bin: natsServer(t), args: []string{"-js", "-a", "127.0.0.1", "-p", fmt.Sprint(natsPort),
		"-sd", filepath.Join(tmp, "nats")}, env: baseEnv, logDir: logDir}
	all = append(all, nats)
	nats.start(t)

	// Temporal, its own process: this module's Temporal server (1.32, the one cohort dev embeds) on
	// SQLite, built here. Its dynamic config has frontend.enableCancelWorkerPollsOnShutdown, as
	// deploy/runbooks/temporal-setup.md asks of a production server: a stopping worker's polls are
	// completed, never handed a task the worker would drop. The temporal CLI runs the runbook's
	// commands against it.
	cli := temporalCLI(t)
	temporalBin := filepath.Join(tmp, "temporalserver")
	build = exec.Command("go", "build", "-tags", "topology", "-o", temporalBin, "./test/topology/temporalserver")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build temporalserver: %v\n%s", err, out)
	}
	tport := freePort(t)
	tp.temporal = fmt.Sprintf("127.0.0.1:%d", tport)
	temporal := &proc{name: "temporal", bin: temporalBin, args: []string{"-port", fmt.Sprint(tport),
		"-db", filepath.Join(tmp, "temporal.db")}, env: baseEnv, logDir: logDir}
	all = append(all, temporal)
	temporal.start(t)

	for _, dep := range []struct {
		p    *proc
		addr string
	}{{nats, fmt.Sprintf("127.0.0.1:%d", natsPort)}, {temporal, tp.temporal}} {
		if !waitUntil(60*time.Second, func() bool {
			c, err := net.DialTimeout("tcp", dep.addr, time.Second)
			if err == nil {
				_ = c.Close()
			}
			return err == nil || !dep.p.alive()
		}) || !dep.p.alive() {
			t.Fatalf("%s did not listen on %s:\n%s", dep.p.name, dep.addr, dep.p.tail(30))
		}
	}
	// The runbook's step (deploy/runbooks/temporal-setup.md): Cohort's custom search attributes.
	for _, name := range []string{"CohortTenant", "CohortSegment", "CohortConnector"} {
		var out []byte
		var err error
		waitUntil(30*time.Second, func() bool {
			out, err = exec.Command(cli, "operator", "search-attribute", "create", "--address", tp.temporal,
				"--namespace", "default", "--name", name, "--type", "Int").CombinedOutput()
			return err == nil
		})
		if err != nil {
			t.Fatalf("search attribute %s: %v\n%s", name, err, out)
		}
	}
	tc, err := client.Dial(client.Options{HostPort: tp.temporal, Namespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	tp.tc = tc

	// Postgres: a fresh database, migrated.
	tp.dbURL = testenv.Database(t)
	tp.pool, err = pgxpool.New(context.Background(), tp.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tp.pool.Close)

	tp.model = &openaifake.Server{}
	modelServer := httptest.NewServer(tp.model)
	t.Cleanup(modelServer.Close)

	run := fmt.Sprintf("topo%d", time.Now().UnixNano()%1e9)
	dataDir := filepath.Join(tmp, "data") // COHORT_BLOB_STORE=local: the volume every replica shares
	common := append(baseEnv,
		"DATABASE_URL="+tp.dbURL,
		"COHORT_SECRET_KEY=topology-test-secret-key-0123456789abcdef",
		"TEMPORAL_ADDRESS="+tp.temporal,
		"TEMPORAL_NAMESPACE=default",
		"NATS_URL="+fmt.Sprintf("nats://127.0.0.1:%d", natsPort),
		"NATS_STREAM=COHORT_EVENTS_"+strings.ToUpper(run),
		"NATS_SUBJECT=cohort."+run+".events",
		"NATS_CONSUMER=cohort-loader-"+run,
		"NATS_ACK_WAIT=5s", // a SIGKILLed worker's unacked messages come back after 5 s
		"COHORT_WAREHOUSE=postgres",
		"COHORT_BLOB_STORE=local",
		"COHORT_DATA_DIR="+dataDir,
		"COHORT_AI_PROVIDER=openai", // the slow model below, in this process
		"OPENAI_BASE_URL="+modelServer.URL+"/v1",
		"OPENAI_API_KEY=sk-topology-test",
		"OPENAI_EMBEDDING_DIMENSIONS=64",
		"COHORT_LOG_FORMAT=json",
		"COHORT_LOG_LEVEL=info",
		"COHORT_WORKER_STOP_TIMEOUT=20s",
		"COHORT_AI_RATE_LIMIT=10000", // the test polls search; rate limits are not what it tests
	)

	// The tenant, created by the command an operator uses.
	create := exec.Command(tp.bin, "tenants", "create", "--slug", tp.slug)
	create.Env = common
	var stderr bytes.Buffer
	create.Stderr = &stderr
	out, err := create.Output()
	if err != nil {
		t.Fatalf("tenants create: %v\n%s", err, stderr.String())
	}
	var created struct {
		ID        int64  `json:"id"`
		SecretKey string `json:"secret_key"`
		Token     string `json:"token"`
	}
	if err := json.Unmarshal(out, &created); err != nil {
		t.Fatalf("tenants create printed %q: %v", out, err)
	}
	tp.tenantID, tp.secret, tp.token = created.ID, created.SecretKey, created.Token

	for i := range tp.apis {
		addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		tp.apiBase[i] = "http://" + addr
		tp.apis[i] = &proc{name: fmt.Sprintf("api%d", i+1), bin: tp.bin, args: []string{"serve"}, logDir: logDir,
			env: append(append([]string{}, common...), "COHORT_HTTP_ADDR="+addr, "COHORT_PUBLIC_URL="+tp.apiBase[i],
				fmt.Sprintf("COHORT_METRICS_ADDR=127.0.0.1:%d", freePort(t)))}
		all = append(all, tp.apis[i])
	}
	for i := range tp.workers {
		tp.workers[i] = &proc{name: fmt.Sprintf("worker%d", i+1), bin: tp.bin, args: []string{"worker"}, logDir: logDir,
			// The local blob store signs download links for the API: the worker needs its URL too.
			env: append(append([]string{}, common...), "COHORT_PUBLIC_URL="+tp.apiBase[0],
				fmt.Sprintf("COHORT_METRICS_ADDR=127.0.0.1:%d", freePort(t)))}
		all = append(all, tp.workers[i])
	}
	for i := range tp.apis {
		tp.startAPI(i)
	}
	for i := range tp.workers {
		tp.startWorker(i)
	}
	return tp
}

func (tp *topo) startAPI(i int) {
	t := tp.t
	t.Helper()
	p := tp.apis[i]
	p.start(t)
	if !waitUntil(60*time.Second, func() bool {
		resp, err := http.Get(tp.apiBase[i] + "/readyz")
		if err != nil {
			return !p.alive()
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}) || !p.alive() {
		t.Fatalf("%s not ready:\n%s", p.name, p.tail(30))
	}
}

func (tp *topo) startWorker(i int) {
	t := tp.t
	t.Helper()
	p := tp.workers[i]
	p.start(t)
	if !waitUntil(60*time.Second, func() bool {
		return strings.Contains(p.log(), `"msg":"temporal worker started"`) || !p.alive()
	}) || !p.alive() {
		t.Fatalf("%s did not start its Temporal worker:\n%s", p.name, p.tail(30))
	}
}

// do sends a request to API i with the tenant's secret key and decodes a JSON answer into out.
func (tp *topo) do(i int, method, path string, body []byte, out any) int {
	tp.t.Helper()
	return tp.doAs(i, "ApiKey "+tp.secret, method, path, body, out)
}

// bearer is do with the tenant's bearer token (the segment endpoints).
func (tp *topo) bearer(i int, method, path string, body []byte, out any) int {
	tp.t.Helper()
	return tp.doAs(i, "Bearer "+tp.token, method, path, body, out)
}

func (tp *topo) doAs(i int, authz, method, path string, body []byte, out any) int {
	t := tp.t
	t.Helper()
	req, err := http.NewRequest(method, tp.apiBase[i]+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", authz)
	req.Header.Set("Content-Type", "application/json")
	resp, err := tp.http.Do(req)
	if err != nil {
		t.Fatalf("%s %s on api%d: %v", method, path, i+1, err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && len(raw) > 0 && resp.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, raw, err)
		}
	}
	if resp.StatusCode >= 400 {
		t.Logf("%s %s on api%d: %d %s", method, path, i+1, resp.StatusCode, strings.TrimSpace(string(raw)))
	}
	return resp.StatusCode
}

func (tp *topo) count(sql string, args ...any) int {
	tp.t.Helper()
	var n int
	if err := tp.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		tp.t.Fatal(err)
	}
	return n
}

func (tp *topo) stored() int {
	return tp.count(`SELECT count(*) FROM warehouse.events WHERE tenant_id = $1`, tp.tenantID)
}

// sender streams event batches with distinct message ids, alternately to both APIs, and keeps the
// ids of every event answered 202.
type sender struct {
	tp       *topo
	mu       sync.Mutex
	accepted []string
	failed   int
	batches  atomic.Int64
	stop     chan struct{}
	done     chan struct{}
}

func (tp *topo) send() *sender {
	s := &sender{tp: tp, stop: make(chan struct{}), done: make(chan struct{})}
	client := &http.Client{Timeout: 10 * time.Second}
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Go(func() {
			for k := 0; ; k++ {
				select {
				case <-s.stop:
					return
				default:
				}
				api := (c + k) % 2
				ids := make([]string, 100)
				var body bytes.Buffer
				body.WriteString(`{"events":[`)
				for i := range ids {
					ids[i] = fmt.Sprintf("c%d-b%d-e%d", c, k, i)
					if i > 0 {
						body.WriteByte(',')
					}
					fmt.Fprintf(&body, `{"message_id":%q,"user_id":"user-%d","event_type":"order_completed","payload":{"amount":%d}}`, ids[i], (k*100+i)%500, i)
				}
				body.WriteString(`]}`)
				req, _ := http.NewRequest(http.MethodPost, tp.apiBase[api]+"/api/ingestion/track/batch/", &body)
				req.Header.Set("Authorization", "ApiKey "+tp.secret)
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil { // that API is down or went away mid-request: not accepted
					s.mu.Lock()
					s.failed++
					s.mu.Unlock()
					time.Sleep(20 * time.Millisecond)
					continue
				}
				raw, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				var r struct {
					Queued int `json:"queued"`
				}
				s.mu.Lock()
				if resp.StatusCode == http.StatusAccepted && json.Unmarshal(raw, &r) == nil && r.Queued == len(ids) {
					s.accepted = append(s.accepted, ids...)
				} else {
					s.failed++
				}
				s.mu.Unlock()
				s.batches.Add(1)
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	go func() { wg.Wait(); close(s.done) }()
	return s
}

func (s *sender) counts() (accepted, failed int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.accepted), s.failed
}

func (s *sender) finish() []string {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.accepted...)
}

func (tp *topo) logCounts(what string, s *sender) {
	tp.t.Helper()
	a, f := s.counts()
	tp.t.Logf("%-34s accepted=%d failed_requests=%d stored=%d", what, a, f, tp.stored())
}

// waitMore waits until n more batches were answered.
func (s *sender) waitMore(t *testing.T, n int64) {
	t.Helper()
	target := s.batches.Load() + n
	if !waitUntil(60*time.Second, func() bool { return s.batches.Load() >= target }) {
		t.Fatalf("the senders did not get %d more answers within 60s", n)
	}
}

func TestReplicaTopology(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("signals and process groups: linux only")
	}
	tp := startTopology(t)
	t.Logf("topology up: api1 %s, api2 %s, 2 workers, temporal %s, tenant %d", tp.apiBase[0], tp.apiBase[1], tp.temporal, tp.tenantID)

	// Each part runs as a subtest; tp's helpers fail the subtest running them.
	sub := func(name string, f func(*testing.T)) {
		t.Run(name, func(t *testing.T) {
			parent := tp.t
			tp.t = t
			defer func() { tp.t = parent }()
			f(t)
		})
	}
	sub("events exactly once across a worker SIGKILL and an API SIGTERM", tp.events)
	sub("rolling restart of a worker during a bulk generation", tp.rollingBulk)
	sub("work finishes while a worker is SIGKILLed mid-way", tp.killMidway)
	sub("replicas converge", tp.converge)
}

func (tp *topo) events(t *testing.T) {
	s := tp.send()
	s.waitMore(t, 20)
	tp.logCounts("before SIGKILL worker1:", s)
	tp.workers[0].stop(t, syscall.SIGKILL, 10*time.Second)
	tp.logCounts("after SIGKILL worker1:", s)
	s.waitMore(t, 20)
	tp.startWorker(0)
	tp.logCounts("worker1 restarted:", s)
	s.waitMore(t, 20)

	tp.logCounts("before SIGTERM api2:", s)
	took := tp.apis[1].stop(t, syscall.SIGTERM, 30*time.Second)
	tp.logCounts(fmt.Sprintf("after SIGTERM api2 (exited in %v):", took.Round(time.Millisecond)), s)
	if !strings.Contains(tp.apis[1].log(), `"msg":"signal received: stopping"`) {
		t.Errorf("api2 did not log the signal:\n%s", tp.apis[1].tail(20))
	}
	s.waitMore(t, 20)
	tp.startAPI(1)
	tp.logCounts("api2 restarted:", s)
	s.waitMore(t, 20)
	accepted := s.finish()
	tp.logCounts("senders stopped:", s)

	// A killed worker's unacked messages come back after NATS_ACK_WAIT (5 s).
	waitUntil(90*time.Second, func() bool { return tp.stored() >= len(accepted) })
	var missing, dups int
	ctx := context.Background()
	if err := tp.pool.QueryRow(ctx, `SELECT count(*) FROM unnest($2::text[]) AS a(id)
		WHERE NOT EXISTS (SELECT 1 FROM warehouse.events e WHERE e.tenant_id = $1 AND e.event_id = a.id)`, tp.tenantID, accepted).Scan(&missing); err != nil {
		t.Fatal(err)
	}
	if err := tp.pool.QueryRow(ctx, `SELECT count(*) - count(DISTINCT event_id) FROM warehouse.events WHERE tenant_id = $1`, tp.tenantID).Scan(&dups); err != nil {
		t.Fatal(err)
	}
	tp.logCounts("settled:", s)
	t.Logf("accepted=%d missing=%d stored_more_than_once=%d", len(accepted), missing, dups)
	if missing != 0 || dups != 0 {
		t.Fatalf("%d accepted events missing and %d stored more than once (of %d accepted)", missing, dups, len(accepted))
	}
}

type bulkJob struct {
	Status    string `json:"status"`
	Total     int    `json:"total"`
	Completed int    `json:"completed"`
	Failed    int    `json:"failed"`
}

// catalogue stores n products through API i and waits until every one is embedded.
func (tp *topo) catalogue(t *testing.T, i int, n int) {
	t.Helper()
	if code := tp.do(i, http.MethodPut, "/api/pim/schema/", []byte(`{"fields":[
		{"name":"category","type":"string","searchable":true},{"name":"material","type":"string","searchable":true},
		{"name":"price","type":"price"}]}`), nil); code != http.StatusOK {
		t.Fatalf("schema: %d", code)
	}
	materials := []string{"linen", "wool", "leather", "cotton", "silk", "denim"}
	categories := []string{"dress", "coat", "boots", "shirt", "scarf", "jacket", "skirt"}
	var products []string
	for k := range n {
		m, c := materials[k%len(materials)], categories[(k/len(materials))%len(categories)]
		products = append(products, fmt.Sprintf(`{"sku":"p-%d","name":"%s %s %d","category":%q,"material":%q,"price":%d}`, k, m, c, k, c, m, 20+k))
	}
	var sum struct{ Created int }
	if code := tp.do(i, http.MethodPost, "/api/pim/products/bulk/", []byte(`{"products":[`+strings.Join(products, ",")+`]}`), &sum); code != http.StatusOK {
		t.Fatalf("bulk products: %d", code)
	}
	if !waitUntil(2*time.Minute, func() bool { return tp.pendingEmbeddings() == 0 }) {
		t.Fatal("products not embedded within 2 minutes")
	}
}

func (tp *topo) rollingBulk(t *testing.T) {
	tp.catalogue(t, 0, 84)
	const queries = 41
	materials := []string{"linen", "wool", "leather", "cotton", "silk", "denim"}
	for k := range queries {
		body := fmt.Sprintf(`{"text":"%s pieces edit %d"}`, materials[k%len(materials)], k)
		if code := tp.do(k%2, http.MethodPost, "/api/ai-pages/queries/", []byte(body), nil); code != http.StatusCreated {
			t.Fatalf("create query %d: %d", k, code)
		}
	}
	// Page copy takes 1.5 s, as a (fast) real model's would: the SIGTERM finds copies in flight.
	tp.model.CopyDelay.Store(int64(1500 * time.Millisecond))
	defer tp.model.CopyDelay.Store(0)
	bulkStart := time.Now()
	var started struct {
		JobID int64 `json:"job_id"`
	}
	if code := tp.do(1, http.MethodPost, "/api/ai-pages/pages/bulk-generate/", nil, &started); code != http.StatusAccepted {
		t.Fatalf("bulk-generate: %d", code)
	}
	jobPath := fmt.Sprintf("/api/ai-pages/jobs/%d/", started.JobID)
	var job bulkJob
	if !waitUntil(60*time.Second, func() bool {
		job = bulkJob{}
		tp.do(0, http.MethodGet, jobPath, nil, &job)
		return job.Completed+job.Failed >= 1 && tp.model.InFlight.Load() >= 2
	}) {
		t.Fatalf("the bulk job did not start within 60s: %+v", job)
	}
	finished, cutOff := tp.model.Finished.Load(), tp.model.CutOff.Load()
	t.Logf("before SIGTERM worker2: job %s, %d/%d completed, %d failed; page copies in flight %d", job.Status, job.Completed, job.Total, job.Failed, tp.model.InFlight.Load())
	if job.Completed+job.Failed >= job.Total {
		t.Fatalf("the bulk job finished before the rolling restart: %+v", job)
	}
	term := time.Now()
	took := tp.workers[1].stop(t, syscall.SIGTERM, 40*time.Second)
	job = bulkJob{}
	tp.do(0, http.MethodGet, jobPath, nil, &job)
	t.Logf("after SIGTERM worker2 (exited in %v): job %s, %d/%d completed, %d failed; page copies meanwhile finished %d, cut off %d",
		took.Round(time.Millisecond), job.Status, job.Completed, job.Total, job.Failed, tp.model.Finished.Load()-finished, tp.model.CutOff.Load()-cutOff)
	if n := tp.model.CutOff.Load() - cutOff; n != 0 {
		t.Errorf("%d page copies cut off by the stopping worker, want them finished", n)
	}
	w2log := tp.workers[1].log()
	for _, want := range []string{`"msg":"signal received: stopping"`, `"msg":"temporal worker stopping`} {
		if !strings.Contains(w2log, want) {
			t.Errorf("worker2's log lacks %s:\n%s", want, tp.workers[1].tail(20))
		}
	}
	tp.startWorker(1)
	t.Logf("worker2 replaced %v after the SIGTERM", time.Since(term).Round(time.Millisecond))
	if !waitUntil(3*time.Minute, func() bool {
		job = bulkJob{}
		tp.do(1, http.MethodGet, jobPath, nil, &job)
		return job.Status == "complete" || job.Status == "partial_failure"
	}) {
		t.Fatalf("the bulk job did not finish within 3 minutes of the rolling restart: %+v", job)
	}
	sinceTerm := time.Since(term)
	t.Logf("bulk job %s %v after the SIGTERM (%v in all): %d/%d completed, %d failed", job.Status, sinceTerm.Round(time.Millisecond),
		time.Since(bulkStart).Round(time.Millisecond), job.Completed, job.Total, job.Failed)
	if job.Status != "complete" || job.Completed != queries {
		t.Errorf("bulk job %+v, want all %d pages complete", job, queries)
	}

	// The histories: every activity's attempts, and no activity that waited for its timeout.
	timedOut, wfTimedOut, byType := tp.activityAttempts(t, bulkStart)
	tp.logAttempts(byType)
	if timedOut != 0 {
		t.Errorf("%d activities timed out (waited for their StartToClose timeout) across the rolling restart", timedOut)
	}
	// Nor a workflow task: the server completes a stopping worker's polls (ShutdownWorker with
	// frontend.enableCancelWorkerPollsOnShutdown) instead of handing it a task it will drop.
	if wfTimedOut != 0 {
		t.Errorf("%d workflow tasks timed out across the graceful stop (dispatched to the stopping worker)", wfTimedOut)
	}
	// No activity waited for its timeout: the shortest StartToClose of a page is minutes, the
	// job ends in seconds.
	if sinceTerm > 60*time.Second {
		t.Errorf("the job finished %v after the SIGTERM: work waited for a timeout", sinceTerm)
	}
}

func histogram(attempts []int32) string {
	h := map[int32]int{}
	for _, a := range attempts {
		h[a]++
	}
	keys := make([]int32, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "#%d:%d", k, h[k])
	}
	return b.String()
}

// activityAttempts reads the history of every workflow of the tenant started since since, through
// the Temporal client, and returns the number of activity timeouts, of workflow task timeouts and,
// by activity type, the attempt of every completed, failed or timed-out activity.
func (tp *topo) activityAttempts(t *testing.T, since time.Time) (timedOut, wfTasksTimedOut int, byType map[string][]int32) {
	defer func() { t.Logf("%d workflow tasks timed out (held by a worker that went away)", wfTasksTimedOut) }()
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	byType = map[string][]int32{}
	query := fmt.Sprintf("CohortTenant = %d AND StartTime >= '%s'", tp.tenantID, since.Add(-time.Second).UTC().Format(time.RFC3339))
	var token []byte
	workflows := 0
	for {
		resp, err := tp.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: "default", Query: query, NextPageToken: token})
		if err != nil {
			t.Fatalf("list workflows: %v", err)
		}
		for _, e := range resp.Executions {
			workflows++
			scheduled := map[int64]string{}
			started := map[int64]int32{}
			it := tp.tc.GetWorkflowHistory(ctx, e.Execution.WorkflowId, e.Execution.RunId, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() {
				ev, err := it.Next()
				if err != nil {
					t.Fatalf("history of %s: %v", e.Execution.WorkflowId, err)
				}
				switch ev.EventType {
				case enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
					wfTasksTimedOut++
					t.Logf("workflow task timed out: %s (%v)", e.Execution.WorkflowId, ev.GetWorkflowTaskTimedOutEventAttributes().TimeoutType)
				case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
					scheduled[ev.EventId] = ev.GetActivityTaskScheduledEventAttributes().ActivityType.GetName()
				case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
					a := ev.GetActivityTaskStartedEventAttributes()
					started[a.ScheduledEventId] = a.Attempt
					// A retried attempt carries why the one before ended: a timeout means it waited.
					if f := a.GetLastFailure(); a.Attempt > 1 && f != nil {
						waited := f.GetTimeoutFailureInfo() != nil
						if waited {
							timedOut++
						}
						t.Logf("retried: %s %s attempt %d after %q (timeout: %v) on %s", e.Execution.WorkflowId, scheduled[a.ScheduledEventId], a.Attempt, f.GetMessage(), waited, a.Identity)
					}
				case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED,
					enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT, enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
					sid := scheduledID(ev)
					byType[scheduled[sid]] = append(byType[scheduled[sid]], started[sid])
					if ev.EventType == enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT {
						timedOut++
						t.Logf("timed out: %s %s attempt %d", e.Execution.WorkflowId, scheduled[sid], started[sid])
					}
				}
			}
		}
		token = resp.NextPageToken
		if len(token) == 0 {
			break
		}
	}
	t.Logf("read the histories of %d workflows started since the bulk generation", workflows)
	return timedOut, wfTasksTimedOut, byType
}

func scheduledID(ev *historypb.HistoryEvent) int64 {
	switch ev.EventType {
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
		return ev.GetActivityTaskCompletedEventAttributes().ScheduledEventId
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
		return ev.GetActivityTaskFailedEventAttributes().ScheduledEventId
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
		return ev.GetActivityTaskTimedOutEventAttributes().ScheduledEventId
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
		return ev.GetActivityTaskCanceledEventAttributes().ScheduledEventId
	}
	return 0
}

type segment struct {
	ID             int64      `json:"id"`
	Status         string     `json:"status"`
	Version        int        `json:"version"`
	ComputedCount  int64      `json:"computed_count"`
	LastComputedAt *time.Time `json:"last_computed_at"`
	LastError      *string    `json:"last_error"`
}

// newSegment creates a rule segment with def through API i (which starts its compute).
func (tp *topo) newSegment(i int, name, def string) segment {
	t := tp.t
	t.Helper()
	var seg segment
	if code := tp.bearer(i, http.MethodPost, "/api/segments/", []byte(fmt.Sprintf(`{"name":%q,"tenant":%d,"segment_type":"rule"}`, name, tp.tenantID)), &seg); code != http.StatusCreated {
		t.Fatalf("create segment %s: %d", name, code)
	}
	if code := tp.bearer(i, http.MethodPatch, fmt.Sprintf("/api/segments/%d/", seg.ID), []byte(`{"definition":`+def+`}`), &seg); code != http.StatusOK {
		t.Fatalf("define segment %s: %d", name, code)
	}
	return seg
}

func (tp *topo) getSegment(i int, id int64) segment {
	var seg segment
	tp.bearer(i, http.MethodGet, fmt.Sprintf("/api/segments/%d/", id), nil, &seg)
	return seg
}

// computedAfter reports whether seg was computed (ready) after since.
func computedAfter(seg segment, since time.Time) bool {
	return seg.Status == "ready" && seg.LastComputedAt != nil && seg.LastComputedAt.After(since)
}

type exportState struct {
	ExportID int64  `json:"export_id"`
	Status   string `json:"status"`
	RowCount *int64 `json:"row_count"`
}

// pendingEmbeddings counts the tenant's products waiting for an embedding (in the database: the
// search endpoint that also reports it is rate limited to 100 requests a minute).
func (tp *topo) pendingEmbeddings() int {
	return tp.count(`SELECT count(*) FROM product_embedding_queue WHERE tenant_id = $1`, tp.tenantID)
}

// killMidway leaves worker1 the only worker, starts an embedding backlog and a bulk page
// generation, then a segment compute and an export, SIGKILLs worker1 while they run (so whatever it
// held is lost), starts both workers again (as Kubernetes would) and waits for each to finish.
func (tp *topo) killMidway(t *testing.T) {
	// The export's segment, computed before: every user with an order (the events of the first part).
	buyers := tp.newSegment(0, "Buyers", `{"logic":"AND","conditions":[{"type":"monetary","event_type":"order_completed","property":"amount","metric":"sum","operator":"gte","value":1}]}`)
	if !waitUntil(2*time.Minute, func() bool { return computedAfter(tp.getSegment(0, buyers.ID), time.Time{}) }) {
		t.Fatalf("segment Buyers not computed: %+v", tp.getSegment(0, buyers.ID))
	}
	buyers = tp.getSegment(0, buyers.ID)
	t.Logf("segment Buyers: %d members", buyers.ComputedCount)

	// worker1 alone holds the work it picks up.
	took := tp.workers[1].stop(t, syscall.SIGTERM, 40*time.Second)
	t.Logf("worker2 stopped (SIGTERM, %v): worker1 runs everything until it is killed", took.Round(time.Millisecond))

	began := time.Now()
	const backlog = 3000
	for b := range backlog / 1000 {
		var products []string
		for k := b * 1000; k < (b+1)*1000; k++ {
			products = append(products, fmt.Sprintf(`{"sku":"bk-%d","name":"backlog item %d cotton scarf","category":"scarf","material":"cotton","price":%d}`, k, k, 10+k%90))
		}
		if code := tp.do(1, http.MethodPost, "/api/pim/products/bulk/", []byte(`{"products":[`+strings.Join(products, ",")+`]}`), nil); code != http.StatusOK {
			t.Fatalf("bulk products: %d", code)
		}
	}
	var started struct {
		JobID int64 `json:"job_id"`
	}
	if code := tp.do(0, http.MethodPost, "/api/ai-pages/pages/bulk-generate/", nil, &started); code != http.StatusAccepted {
		t.Fatalf("bulk-generate: %d", code)
	}
	jobPath := fmt.Sprintf("/api/ai-pages/jobs/%d/", started.JobID)
	var job bulkJob
	if !waitUntil(time.Minute, func() bool {
		job = bulkJob{}
		tp.do(0, http.MethodGet, jobPath, nil, &job)
		p := tp.pendingEmbeddings()
		return job.Status == "running" && p > 0 && p < backlog
	}) {
		t.Fatalf("the backlog and the bulk job are not both under way within a minute: job %+v, pending %d", job, tp.pendingEmbeddings())
	}
	// Then a segment compute (killed once it is computing) and an export (killed as it starts).
	big := tp.newSegment(1, "Big spenders", `{"logic":"AND","conditions":[{"type":"monetary","event_type":"order_completed","property":"amount","metric":"sum","operator":"gte","value":3000}]}`)
	if !waitEvery(5*time.Second, 10*time.Millisecond, func() bool { return tp.getSegment(0, big.ID).Status != "queued" }) {
		t.Logf("segment Big spenders still queued after 5 s")
	}
	var ex exportState
	if code := tp.bearer(0, http.MethodPost, fmt.Sprintf("/api/segments/%d/export/", buyers.ID), []byte(`{"format":"csv"}`), &ex); code != http.StatusAccepted {
		t.Fatalf("export: %d", code)
	}
	state := func(when string) {
		var job bulkJob
		tp.do(0, http.MethodGet, jobPath, nil, &job)
		var e exportState
		tp.bearer(1, http.MethodGet, fmt.Sprintf("/api/segments/%d/export/?export_id=%d", buyers.ID, ex.ExportID), nil, &e)
		seg := tp.getSegment(1, big.ID)
		t.Logf("%-26s segment %s (v%d, %d members); export %s; pending embeddings %d; bulk job %s %d/%d (%d failed)",
			when, seg.Status, seg.Version, seg.ComputedCount, e.Status, tp.pendingEmbeddings(), job.Status, job.Completed, job.Total, job.Failed)
	}
	state("before SIGKILL worker1:")
	tp.workers[0].stop(t, syscall.SIGKILL, 10*time.Second)
	killed := time.Now()
	state("after SIGKILL worker1:")
	time.Sleep(2 * time.Second)
	state("2 s later, no worker:")
	tp.startWorker(0)
	tp.startWorker(1)
	state("both workers started:")

	// An activity the killed worker held is retried once its timeout runs out (a heartbeat's
	// minute, or the StartToClose of a page copy: five minutes), so allow ten.
	limit := 10 * time.Minute
	done := map[string]time.Duration{}
	if !waitUntil(limit, func() bool {
		if _, ok := done["segment compute"]; !ok {
			if seg := tp.getSegment(0, big.ID); computedAfter(seg, began) {
				done["segment compute"] = time.Since(killed)
			} else if seg.Status == "error" {
				t.Fatalf("segment compute failed: %+v", seg)
			}
		}
		if _, ok := done["export"]; !ok {
			var e exportState
			tp.bearer(0, http.MethodGet, fmt.Sprintf("/api/segments/%d/export/?export_id=%d", buyers.ID, ex.ExportID), nil, &e)
			if e.Status == "ready" {
				done["export"] = time.Since(killed)
				if e.RowCount == nil || *e.RowCount != buyers.ComputedCount {
					t.Errorf("export rows %v, want %d", e.RowCount, buyers.ComputedCount)
				}
			} else if e.Status == "error" {
				t.Fatalf("export failed: %+v", e)
			}
		}
		if _, ok := done["embedding backlog"]; !ok && tp.pendingEmbeddings() == 0 {
			done["embedding backlog"] = time.Since(killed)
		}
		if _, ok := done["bulk generation"]; !ok {
			var job bulkJob
			tp.do(1, http.MethodGet, jobPath, nil, &job)
			if job.Status == "complete" || job.Status == "partial_failure" {
				done["bulk generation"] = time.Since(killed)
				if job.Status != "complete" {
					t.Errorf("bulk job %+v, want complete", job)
				}
			}
		}
		return len(done) == 4
	}) {
		state("at the deadline:")
		t.Fatalf("within %v of the SIGKILL only these finished: %v", limit, done)
	}
	state("all finished:")
	for _, k := range []string{"segment compute", "export", "embedding backlog", "bulk generation"} {
		t.Logf("%-18s finished %v after the SIGKILL", k, done[k].Round(time.Millisecond))
	}
	if n := tp.count(`SELECT count(*) FROM products WHERE tenant_id = $1 AND sku LIKE 'bk-%'`, tp.tenantID); n != backlog {
		t.Errorf("%d backlog products stored, want %d", n, backlog)
	}
	timedOut, _, byType := tp.activityAttempts(t, began)
	tp.logAttempts(byType)
	t.Logf("%d activities timed out (held by the killed worker, retried elsewhere)", timedOut)
}

func (tp *topo) logAttempts(byType map[string][]int32) {
	types := make([]string, 0, len(byType))
	for k := range byType {
		types = append(types, k)
	}
	sort.Strings(types)
	for _, k := range types {
		a := byType[k]
		tp.t.Logf("activity %-28s runs=%-4d attempts=%v", k, len(a), histogram(a))
	}
}

// converge checks that what one replica changes, the other answers: segment membership after a
// recompute and a new product in search within 5 s, a published page's change within the public
// cache's lifetime.
func (tp *topo) converge(t *testing.T) {
	// Membership: "vip" is in no segment and both APIs have cached that.
	vipSeg := tp.newSegment(0, "VIPs", `{"logic":"AND","conditions":[{"type":"monetary","event_type":"order_completed","property":"amount","metric":"sum","operator":"gte","value":1000000}]}`)
	if !waitUntil(2*time.Minute, func() bool { return computedAfter(tp.getSegment(0, vipSeg.ID), time.Time{}) }) {
		t.Fatalf("segment VIPs not computed: %+v", tp.getSegment(0, vipSeg.ID))
	}
	type membership struct {
		SegmentIDs []int64 `json:"segment_ids"`
		Cached     bool    `json:"cached"`
	}
	member := func(i int) membership {
		var m membership
		tp.do(i, http.MethodGet, "/api/segments/membership/?user_id=vip", nil, &m)
		return m
	}
	for i := range 2 {
		if !waitUntil(10*time.Second, func() bool { return member(i).Cached }) {
			t.Fatalf("api%d does not cache vip's membership: %+v", i+1, member(i))
		}
		if m := member(i); slices.Contains(m.SegmentIDs, vipSeg.ID) {
			t.Fatalf("vip already in VIPs on api%d: %+v", i+1, m)
		}
	}
	before := tp.stored()
	if code := tp.do(0, http.MethodPost, "/api/ingestion/track/", []byte(`{"user_id":"vip","event_type":"order_completed","message_id":"vip-order","payload":{"amount":2000000}}`), nil); code != http.StatusAccepted {
		t.Fatalf("track: %d", code)
	}
	if !waitUntil(time.Minute, func() bool { return tp.stored() > before }) {
		t.Fatal("vip's order not stored within a minute")
	}
	asked := time.Now()
	if code := tp.bearer(1, http.MethodPost, fmt.Sprintf("/api/segments/%d/compute/", vipSeg.ID), nil, nil); code != http.StatusAccepted {
		t.Fatalf("compute: %d", code)
	}
	var recomputed time.Time
	if !waitUntil(time.Minute, func() bool { return computedAfter(tp.getSegment(1, vipSeg.ID), asked) }) {
		t.Fatalf("VIPs not recomputed: %+v", tp.getSegment(1, vipSeg.ID))
	}
	recomputed = time.Now()
	for i := range 2 {
		ok := waitUntil(5*time.Second-time.Since(recomputed), func() bool { return slices.Contains(member(i).SegmentIDs, vipSeg.ID) })
		t.Logf("membership: api%d answers vip in VIPs %v after the recompute finished", i+1, time.Since(recomputed).Round(time.Millisecond))
		if !ok {
			t.Errorf("api%d still answers %+v 5 s after the recompute", i+1, member(i))
		}
	}

	// A product upserted through api1 is found through api2 (whose index is loaded) within 5 s,
	// polled every 150 ms (search allows 100 requests a minute).
	if code := tp.do(1, http.MethodGet, "/api/ai-pages/query?q=brass+lantern&limit=3", nil, nil); code != http.StatusOK {
		t.Fatalf("search on api2: %d", code)
	}
	upserted := time.Now()
	if code := tp.do(0, http.MethodPost, "/api/pim/products/", []byte(`{"sku":"zz-quokka","name":"Zanzibar quokka lantern","data":{"category":"lantern","material":"brass","price":99}}`), nil); code != http.StatusCreated && code != http.StatusOK {
		t.Fatalf("create product: %d", code)
	}
	found := waitEvery(5*time.Second, 150*time.Millisecond, func() bool {
		var r struct {
			Products []struct {
				SKU string `json:"sku"`
			} `json:"products"`
		}
		return tp.do(1, http.MethodGet, "/api/ai-pages/query?q=zanzibar+quokka+lantern&limit=3", nil, &r) == http.StatusOK &&
			len(r.Products) > 0 && r.Products[0].SKU == "zz-quokka"
	})
	t.Logf("search: the product upserted through api1 is the top answer on api2 %v after the upsert", time.Since(upserted).Round(time.Millisecond))
	if !found {
		t.Errorf("the product upserted through api1 is not found through api2 within 5 s")
	}

	// A published page: both APIs serve it (and cache it); a change made through api1 is on both
	// within the public cache's lifetime (2 s; polling and the answer add up to 250 ms).
	var pages []struct {
		ID     int64  `json:"id"`
		Slug   string `json:"slug"`
		Status string `json:"status"`
	}
	if code := tp.do(0, http.MethodGet, "/api/ai-pages/pages/", nil, &pages); code != http.StatusOK || len(pages) == 0 {
		t.Fatalf("pages: %d %d", code, len(pages))
	}
	pg := pages[0]
	pagePath := fmt.Sprintf("/api/ai-pages/pages/%d/", pg.ID)
	if code := tp.do(0, http.MethodPatch, pagePath, []byte(`{"published":true,"title":"Before"}`), nil); code != http.StatusOK {
		t.Fatalf("publish: %d", code)
	}
	title := func(i int) string {
		var p struct {
			Title string `json:"title"`
		}
		tp.do(i, http.MethodGet, "/api/ai-pages/public/pages/"+tp.slug+"/"+pg.Slug+"/", nil, &p)
		return p.Title
	}
	for i := range 2 {
		if !waitUntil(5*time.Second, func() bool { return title(i) == "Before" }) {
			t.Fatalf("api%d does not serve the published page: title %q", i+1, title(i))
		}
	}
	if code := tp.do(0, http.MethodPatch, pagePath, []byte(`{"title":"After"}`), nil); code != http.StatusOK {
		t.Fatalf("change the page: %d", code)
	}
	changed := time.Now()
	const lifetime = 2 * time.Second // internal/page defaultPublicCacheTTL
	for i := range 2 {
		// An entry cached just before the change lives 2 s; then one poll (50 ms) and its answer.
		ok := waitUntil(lifetime+250*time.Millisecond-time.Since(changed), func() bool { return title(i) == "After" })
		t.Logf("public page: api%d serves the change %v after it was made", i+1, time.Since(changed).Round(time.Millisecond))
		if !ok {
			t.Errorf("api%d still serves %q %v after the change", i+1, title(i), time.Since(changed))
		}
	}
}
