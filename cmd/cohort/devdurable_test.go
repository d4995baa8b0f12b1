package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cohort-dev/cohort/internal/testenv"
)

// devBinary builds this command once per test binary: the durability tests stop a real cohort
// dev process the way a user's Ctrl-C or a crash does.
var devBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "cohort-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "cohort")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v: %s", err, out)
	}
	return bin, nil
})

// devProcess is a cohort dev process on a data dir and database of the test's.
type devProcess struct {
	bin, dataDir, dbURL, addr string
	env                       []string
	cmd                       *exec.Cmd
	exited                    chan error
	log                       *syncBuffer
}

func newDevProcess(t testing.TB) *devProcess {
	t.Helper()
	bin, err := devBinary()
	if err != nil {
		t.Fatal(err)
	}
	p := &devProcess{bin: bin, dataDir: t.TempDir(), dbURL: testenv.Database(t), addr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), log: &syncBuffer{}}
	p.env = append(os.Environ(),
		"DATABASE_URL="+p.dbURL,
		"COHORT_DATA_DIR="+p.dataDir,
		"COHORT_HTTP_ADDR="+p.addr,
		"COHORT_DEV_TEMPORAL_PORT="+strconv.Itoa(freePort(t)),
		"COHORT_DEV_UI_PORT=0",
		"COHORT_LOG_LEVEL=info",
		"COHORT_SECRET_KEY=", "PUBSUB_PROJECT=", "NATS_URL=", "COHORT_BUS=",
	)
	t.Cleanup(func() {
		if p.cmd != nil && p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("cohort dev log:\n%s", tail(p.log.String(), 60))
		}
	})
	return p
}

func tail(s string, lines int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

// start runs cohort dev and waits until it is ready.
func (p *devProcess) start(t testing.TB) {
	t.Helper()
	p.cmd = exec.Command(p.bin, "dev")
	p.cmd.Env = p.env
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.exited = make(chan error, 1)
	go func() { p.exited <- p.cmd.Wait() }()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := http.Get("http://" + p.addr + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case err := <-p.exited:
			t.Fatalf("cohort dev exited before it was ready: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("cohort dev not ready within 2 minutes")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// createTenant runs `cohort tenants create` against the dev's database and data dir.
func (p *devProcess) createTenant(t testing.TB) (id int64, secret string) {
	t.Helper()
	cmd := exec.Command(p.bin, "tenants", "create", "--slug", "shop")
	cmd.Env = p.env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tenants create: %v", err)
	}
	var created struct {
		ID        int64  `json:"id"`
		SecretKey string `json:"secret_key"`
	}
	if err := json.Unmarshal(out, &created); err != nil {
		t.Fatalf("tenants create printed %q: %v", out, err)
	}
	return created.ID, created.SecretKey
}

// stream sends 500-event batches with distinct message ids from 4 clients until stop is closed or
// max batches were sent, and returns the ids of every event that was answered 202 (accepted).
// afterAccepted is closed once n batches were accepted.
func stream(base, key string, max, n int, afterAccepted chan<- struct{}, stop <-chan struct{}) (accepted []string, answered, failed int) {
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	var mu sync.Mutex
	var next, ok atomic.Int64
	var once sync.Once
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				k := int(next.Add(1)) - 1
				if k >= max {
					return
				}
				ids := make([]string, 500)
				var body bytes.Buffer
				body.WriteString(`{"events":[`)
				for i := range ids {
					ids[i] = fmt.Sprintf("b%d-e%d", k, i)
					if i > 0 {
						body.WriteByte(',')
					}
					fmt.Fprintf(&body, `{"message_id":%q,"user_id":"user-%d","event_type":"order_completed","payload":{"amount":%d}}`, ids[i], (k*500+i)%5000, i)
				}
				body.WriteString(`]}`)
				req, _ := http.NewRequest(http.MethodPost, base+"/api/ingestion/track/batch/", &body)
				req.Header.Set("Authorization", "ApiKey "+key)
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil { // the server went away mid-request: not accepted
					mu.Lock()
					failed++
					mu.Unlock()
					return
				}
				raw, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				mu.Lock()
				answered++
				if resp.StatusCode == http.StatusAccepted {
					var r struct {
						Queued int `json:"queued"`
					}
					if json.Unmarshal(raw, &r) == nil && r.Queued == len(ids) {
						accepted = append(accepted, ids...)
					}
				} else {
					failed++
				}
				mu.Unlock()
				if resp.StatusCode == http.StatusAccepted && int(ok.Add(1)) == n {
					once.Do(func() { close(afterAccepted) })
				}
				if resp.StatusCode != http.StatusAccepted {
					return
				}
			}
		})
	}
	wg.Wait()
	return accepted, answered, failed
}

// TestDevKeepsAcceptedEvents is issue 18's check: a real cohort dev process takes batches of
// events with distinct message ids, is killed mid-stream (SIGKILL, then in a second run Ctrl-C's
// SIGINT), is started again, and stores every event that had been answered 202 exactly once.
func TestDevKeepsAcceptedEvents(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			p := newDevProcess(t)
			p.start(t)
			tenantID, key := p.createTenant(t)

			halfway := make(chan struct{})
			stop := make(chan struct{})
			type result struct {
				accepted         []string
				answered, failed int
			}
			res := make(chan result, 1)
			go func() {
				a, n, f := stream("http://"+p.addr, key, 400, 100, halfway, stop)
				res <- result{a, n, f}
			}()
			select {
			case <-halfway:
			case <-time.After(2 * time.Minute):
				t.Fatal("100 batches not accepted within 2 minutes")
			}
			sent := time.Now()
			if err := p.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-p.exited:
				took := time.Since(sent)
				t.Logf("cohort dev exited %v after %v: %v", sig, took.Round(time.Millisecond), err)
				if sig == syscall.SIGINT {
					if err != nil {
						t.Errorf("cohort dev exited with %v after Ctrl-C, want a clean exit", err)
					}
					if took > 15*time.Second {
						t.Errorf("Ctrl-C took %v to stop cohort dev", took)
					}
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("cohort dev still running 30s after %v", sig)
			}
			close(stop)
			r := <-res
			if len(r.accepted) < 100*500 {
				t.Fatalf("only %d events accepted before the stop", len(r.accepted))
			}
			pool, err := pgxpool.New(context.Background(), p.dbURL)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			storedAtStop := countStored(t, pool, tenantID)
			t.Logf("%v: %d events accepted in %d answered requests (%d failed or cut off); %d stored when it stopped",
				sig, len(r.accepted), r.answered, r.failed, storedAtStop)

			p.start(t)
			// Messages a killed process held are redelivered after the consumer's ack wait (30 s).
			deadline := time.Now().Add(2 * time.Minute)
			for countStored(t, pool, tenantID) < len(r.accepted) && time.Now().Before(deadline) {
				time.Sleep(200 * time.Millisecond)
			}
			missing, dups := checkStoredOnce(t, pool, tenantID, r.accepted)
			if missing != 0 || dups != 0 {
				t.Fatalf("after the restart %d accepted events are missing and %d stored more than once (of %d accepted)", missing, dups, len(r.accepted))
			}
			t.Logf("after the restart all %d accepted events are stored once", len(r.accepted))
			if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-p.exited:
				if err != nil {
					t.Errorf("cohort dev exited with %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Error("cohort dev did not stop within 30s of SIGINT")
			}
		})
	}
}

func countStored(t testing.TB, pool *pgxpool.Pool, tenantID int64) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM warehouse.events WHERE tenant_id = $1`, tenantID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// checkStoredOnce counts the accepted event ids that are not stored, and the stored rows beyond
// one per event id.
func checkStoredOnce(t *testing.T, pool *pgxpool.Pool, tenantID int64, accepted []string) (missing, dups int) {
	t.Helper()
	ctx := context.Background()
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM unnest($2::text[]) AS a(id)
		WHERE NOT EXISTS (SELECT 1 FROM warehouse.events e WHERE e.tenant_id = $1 AND e.event_id = a.id)`, tenantID, accepted).Scan(&missing); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) - count(DISTINCT event_id) FROM warehouse.events WHERE tenant_id = $1`, tenantID).Scan(&dups); err != nil {
		t.Fatal(err)
	}
	return missing, dups
}

// BenchmarkDevRSS runs a real cohort dev process (embedded NATS JetStream, Temporal, Postgres
// warehouse), sends it COHORT_BENCH_DEV_EVENTS events (default 5,000,000) in 500-event batches from
// 4 clients, waits until the loader has stored them all, and reports the process's resident
// memory then (rss-MB), at its peak (peak-rss-MB, VmHWM) and before the first event (idle-rss-MB),
// with the end-to-end events/s.
func BenchmarkDevRSS(b *testing.B) {
	total := 5_000_000
	if v := os.Getenv("COHORT_BENCH_DEV_EVENTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatal(err)
		}
		total = n
	}
	for b.Loop() {
		p := newDevProcess(b)
		p.start(b)
		tenantID, key := p.createTenant(b)
		idle, _ := procMemory(b, p.cmd.Process.Pid)
		b.ReportMetric(idle, "idle-rss-MB")
		pool, err := pgxpool.New(context.Background(), p.dbURL)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		never := make(chan struct{})
		accepted, _, failed := stream("http://"+p.addr, key, total/500, total/500+1, make(chan struct{}), never)
		if failed > 0 || len(accepted) != total/500*500 {
			b.Fatalf("%d events accepted, %d requests failed", len(accepted), failed)
		}
		sent := time.Since(start)
		for countStored(b, pool, tenantID) < len(accepted) {
			time.Sleep(500 * time.Millisecond)
		}
		took := time.Since(start)
		pool.Close()
		rss, peak := procMemory(b, p.cmd.Process.Pid)
		b.ReportMetric(rss, "rss-MB")
		b.ReportMetric(peak, "peak-rss-MB")
		b.ReportMetric(float64(len(accepted))/sent.Seconds(), "accepted-events/s")
		b.ReportMetric(float64(len(accepted))/took.Seconds(), "stored-events/s")
		_ = p.cmd.Process.Signal(syscall.SIGINT)
		<-p.exited
	}
}

// procMemory reads a process's resident set size and its peak, in MB.
func procMemory(tb testing.TB, pid int) (rss, peak float64) {
	tb.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb / 1024
		case "VmHWM:":
			peak = kb / 1024
		}
	}
	return rss, peak
}
