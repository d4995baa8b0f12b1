// Package testenv is the test harness of every package: a fresh Postgres database per test package
// with schema/ applied (resolved like cohort dev: DATABASE_URL, else 127.0.0.1:5432, else a
// private cluster from the machine's PostgreSQL binaries), and a shared in-process Temporal server
// for end-to-end tests. Nothing is skipped because a service is missing: a test that needs one and
// cannot get it fails with the reason.
//
// A package that uses Database calls Main from its TestMain so its database (and a private cluster
// it started) is cleaned up:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.temporal.io/sdk/client"

	"github.com/cohort-dev/cohort/internal/devstack"
	"github.com/cohort-dev/cohort/internal/devstack/temporalsrv"
	"github.com/cohort-dev/cohort/internal/store"
	"github.com/cohort-dev/cohort/schema"
	"github.com/cohort-dev/cohort/workflows/searchattr"
)

type harness struct {
	pgOnce sync.Once
	pg     *devstack.Postgres
	pgErr  error

	dbMu      sync.Mutex
	databases []string

	tsOnce sync.Once
	ts     *temporalsrv.Server
	tsErr  error
}

// h is the per-test-binary harness state; a test binary is one package.
var h harness

// Main runs the package's tests and then drops the databases they created and stops a private
// cluster this binary started.
func Main(m *testing.M) {
	code := m.Run()
	cleanup()
	os.Exit(code)
}

func cleanup() {
	if h.pg == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if conn, err := pgx.Connect(ctx, h.pg.AdminURL); err == nil {
		h.dbMu.Lock()
		for _, db := range h.databases {
			_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{db}.Sanitize()+" WITH (FORCE)")
		}
		h.dbMu.Unlock()
		_ = conn.Close(ctx)
	}
	if h.ts != nil {
		h.ts.Stop()
	}
	_ = h.pg.Close()
}

// Server returns the resolved Postgres server, starting a private cluster when needed.
func Server(tb testing.TB) *devstack.Postgres {
	tb.Helper()
	h.pgOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		dataDir := os.Getenv("COHORT_TEST_DATA_DIR")
		if dataDir == "" {
			dataDir = filepath.Join(os.TempDir(), fmt.Sprintf("cohort-test-%d", os.Getuid()))
		}
		h.pg, h.pgErr = devstack.ResolvePostgres(ctx, devstack.PostgresOptions{
			DatabaseURL: os.Getenv("DATABASE_URL"),
			DataDir:     dataDir,
			Database:    "postgres",
		})
	})
	if h.pgErr != nil {
		tb.Fatalf("testenv: no postgres for tests: %v", h.pgErr)
	}
	return h.pg
}

var nonIdent = regexp.MustCompile(`[^a-z0-9_]+`)

// Database creates a fresh database with every migration applied and returns its URL. Each call
// gets its own database, dropped by Main at the end of the package's tests.
func Database(tb testing.TB) string {
	tb.Helper()
	pg := Server(tb)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	name := strings.Trim(nonIdent.ReplaceAllString(strings.ToLower(tb.Name()), "_"), "_")
	if len(name) > 30 {
		name = name[:30]
	}
	db := fmt.Sprintf("cohort_test_%s_%d_%s", name, os.Getpid(), hex.EncodeToString(suffix))
	conn, err := pgx.Connect(ctx, pg.AdminURL)
	if err != nil {
		tb.Fatalf("testenv: connect to postgres: %v", err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize()); err != nil {
		tb.Fatalf("testenv: create database: %v", err)
	}
	h.dbMu.Lock()
	h.databases = append(h.databases, db)
	h.dbMu.Unlock()
	u, err := url.Parse(pg.AdminURL)
	if err != nil {
		tb.Fatalf("testenv: admin url: %v", err)
	}
	u.Path = "/" + db
	dsn := u.String()
	s, err := store.Open(ctx, dsn, store.Options{MaxConns: 4})
	if err != nil {
		tb.Fatalf("testenv: open database: %v", err)
	}
	defer s.Close()
	ms, err := store.LoadMigrations(schema.Postgres, schema.PostgresDir)
	if err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	if _, err := store.Migrate(ctx, s.Pool, ms); err != nil {
		tb.Fatalf("testenv: migrate: %v", err)
	}
	return dsn
}

// OpenDB opens a fresh migrated database, closed when the test ends.
func OpenDB(tb testing.TB) *store.DB {
	tb.Helper()
	s, err := store.Open(context.Background(), Database(tb), store.Options{})
	if err != nil {
		tb.Fatalf("testenv: open database: %v", err)
	}
	tb.Cleanup(s.Close)
	return s
}

// Temporal returns a client of the package's shared in-process Temporal server (started on first
// use, in memory, with Cohort's search attributes registered), closed when the test ends.
func Temporal(tb testing.TB) client.Client {
	tb.Helper()
	h.tsOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		h.ts, h.tsErr = temporalsrv.Start(ctx, temporalsrv.Options{
			SearchAttributes: searchattr.Types(),
			Logger:           slog.New(slog.DiscardHandler),
		})
	})
	if h.tsErr != nil {
		tb.Fatalf("testenv: embedded temporal: %v", h.tsErr)
	}
	c, err := client.Dial(client.Options{HostPort: h.ts.FrontendAddress(), Namespace: h.ts.Namespace(), Logger: quietLogger{}})
	if err != nil {
		tb.Fatalf("testenv: dial temporal: %v", err)
	}
	tb.Cleanup(c.Close)
	return c
}

// TaskQueue returns a task queue name unique to the test.
func TaskQueue(tb testing.TB) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "test-" + nonIdent.ReplaceAllString(strings.ToLower(tb.Name()), "-") + "-" + hex.EncodeToString(b)
}

type quietLogger struct{}

func (quietLogger) Debug(string, ...any) {}
func (quietLogger) Info(string, ...any)  {}
func (quietLogger) Warn(string, ...any)  {}
func (quietLogger) Error(string, ...any) {}

// Tenant inserts a bare tenant row (placeholder sealed secrets: no keys, no webhook) and returns
// its id, for domain tests that need tenant-scoped rows without the tenant service.
func Tenant(tb testing.TB, db *store.DB, slug string) int64 {
	tb.Helper()
	var id int64
	if err := db.Pool.QueryRow(context.Background(), `INSERT INTO tenants (slug, name, webhook_secret_sealed, identity_secret_sealed)
		VALUES ($1, $1, 'sealed', 'sealed') RETURNING id`, slug).Scan(&id); err != nil {
		tb.Fatalf("testenv: create tenant %s: %v", slug, err)
	}
	return id
}

// Exec runs a statement and fails the test on an error.
func Exec(tb testing.TB, db *store.DB, sql string, args ...any) {
	tb.Helper()
	if _, err := db.Pool.Exec(context.Background(), sql, args...); err != nil {
		tb.Fatalf("exec %q: %v", sql, err)
	}
}

// Count runs a query of one integer and fails the test on an error.
func Count(tb testing.TB, db *store.DB, sql string, args ...any) int64 {
	tb.Helper()
	var n int64
	if err := db.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		tb.Fatalf("query %q: %v", sql, err)
	}
	return n
}
