package devstack

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The private-cluster path is what a machine without a running server gets from cohort dev and
// from the tests: initdb + pg_ctl in the data dir, reused while running, stopped on Close, and
// restarted from the same data on the next start.
func TestPrivateClusterLifecycle(t *testing.T) {
	if _, err := FindPostgresBinaries(); err != nil {
		t.Fatalf("this machine must have PostgreSQL server binaries: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	opts := PostgresOptions{DataDir: dir, LocalAddr: "-", Database: "cohort"}

	first, err := ResolvePostgres(ctx, opts)
	if err != nil {
		t.Fatalf("start private cluster: %v", err)
	}
	t.Cleanup(func() { _ = first.Close() })
	if first.Source != SourcePrivate || !first.Owned() {
		t.Fatalf("source %q owned %v, want private and owned", first.Source, first.Owned())
	}
	if _, err := os.Stat(filepath.Join(dir, "postgres", "PG_VERSION")); err != nil {
		t.Fatalf("cluster not initialised under the data dir: %v", err)
	}
	execSQL(t, ctx, first.DatabaseURL, `CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)`)

	// A second resolver (cohort tenants while cohort dev runs) reuses the running cluster and
	// must not stop it.
	second, err := ResolvePostgres(ctx, opts)
	if err != nil {
		t.Fatalf("reuse running cluster: %v", err)
	}
	if second.Owned() || second.DatabaseURL != first.DatabaseURL {
		t.Fatalf("second resolve: owned %v url %q, want not owned and %q", second.Owned(), second.DatabaseURL, first.DatabaseURL)
	}
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
	if got := queryInt(t, ctx, first.DatabaseURL, `SELECT v FROM kept`); got != 42 {
		t.Fatalf("after the reuser closed: got %d, want 42", got)
	}

	if err := first.Close(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if _, err := pgx.Connect(ctx, first.DatabaseURL); err == nil {
		t.Fatal("cluster still answers after Close")
	}

	third, err := ResolvePostgres(ctx, opts)
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	t.Cleanup(func() { _ = third.Close() })
	if got := queryInt(t, ctx, third.DatabaseURL, `SELECT v FROM kept`); got != 42 {
		t.Fatalf("data not kept across restart: got %d", got)
	}
}

func TestResolveOrder(t *testing.T) {
	ctx := context.Background()
	t.Run("DATABASE_URL wins", func(t *testing.T) {
		p, err := ResolvePostgres(ctx, PostgresOptions{DatabaseURL: "postgres://x@db.internal/cohort", DataDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if p.Source != SourceEnv || p.DatabaseURL != "postgres://x@db.internal/cohort" || p.Owned() {
			t.Fatalf("got %+v", p)
		}
	})
	t.Run("local server next", func(t *testing.T) {
		p, err := ResolvePostgres(ctx, PostgresOptions{DataDir: t.TempDir(), Database: "cohort_resolve_test"})
		if err != nil {
			t.Fatalf("a server on 127.0.0.1:5432 is expected on this machine: %v", err)
		}
		if p.Source != SourceLocal {
			t.Fatalf("source %q, want local server", p.Source)
		}
		if got := queryInt(t, ctx, p.DatabaseURL, `SELECT 1`); got != 1 {
			t.Fatal("cannot query the created database")
		}
		execSQL(t, ctx, p.AdminURL, `DROP DATABASE IF EXISTS cohort_resolve_test`)
	})
}

func TestNoBinariesMessage(t *testing.T) {
	// A machine without binaries gets this one line; it must say how to install them.
	for _, want := range []string{"apt-get install postgresql", "DATABASE_URL"} {
		if !strings.Contains(ErrNoPostgresBinaries.Error(), want) {
			t.Fatalf("message %q lacks %q", ErrNoPostgresBinaries, want)
		}
	}
}

func TestDevSecretKeyStable(t *testing.T) {
	dir := t.TempDir()
	a, err := DevSecretKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := DevSecretKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != string(b) || len(a) < 32 {
		t.Fatalf("key not stable or too short: %q %q", a, b)
	}
	st, err := os.Stat(filepath.Join(dir, "secret.key"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, want 0600", st.Mode().Perm())
	}
}

func execSQL(t *testing.T, ctx context.Context, url, sql string) {
	t.Helper()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close(ctx) }()
	if _, err := c.Exec(ctx, sql); err != nil {
		t.Fatal(err)
	}
}

func queryInt(t *testing.T, ctx context.Context, url, sql string) int {
	t.Helper()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close(ctx) }()
	var v int
	if err := c.QueryRow(ctx, sql).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}
