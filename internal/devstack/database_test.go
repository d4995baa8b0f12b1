package devstack

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cohort-dev/cohort/internal/keycheck"
)

const localAdmin = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// dropDatabases drops the databases the data dirs were given, when the test ends.
func dropDatabases(t *testing.T, names *[]string) {
	t.Cleanup(func() {
		ctx := context.Background()
		c, err := pgx.Connect(ctx, localAdmin)
		if err != nil {
			t.Logf("drop databases: %v", err)
			return
		}
		defer func() { _ = c.Close(ctx) }()
		for _, n := range *names {
			if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{n}.Sanitize()+" WITH (FORCE)"); err != nil {
				t.Logf("drop %s: %v", n, err)
			}
		}
	})
}

// TestDataDirsGetTheirOwnDatabase: two data dirs on the same server (rm -rf .cohort, a second
// clone) resolve to two databases, each named in its data dir and kept on the next start; a data
// dir whose key set up the shared database of earlier versions keeps it; a one-off command
// (NewDataDir unset) on a data dir without a database is refused and creates nothing.
func TestDataDirsGetTheirOwnDatabase(t *testing.T) {
	ctx := context.Background()
	var created []string
	dropDatabases(t, &created)
	named := regexp.MustCompile(`^cohort_[0-9a-f]{8}$`)

	// The shared database of earlier versions, set up with legacyKey.
	legacy := "cohort_legacy_" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "_"))
	created = append(created, legacy)
	if err := EnsureDatabase(ctx, localAdmin, legacy); err != nil {
		t.Fatal(err)
	}
	legacyKey := strings.Repeat("L", 48)
	execSQL(t, ctx, withDatabase(localAdmin, legacy), `CREATE TABLE IF NOT EXISTS secret_key_fingerprint (singleton bool PRIMARY KEY, fingerprint text NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
		DELETE FROM secret_key_fingerprint; INSERT INTO secret_key_fingerprint (singleton, fingerprint) VALUES (true, '`+keycheck.Fingerprint([]byte(legacyKey))+`')`)

	withKey := func(key string) string {
		dir := filepath.Join(t.TempDir(), ".cohort")
		if key != "" {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(DevSecretKeyPath(dir), []byte(key+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	resolve := func(dir string, newDataDir bool) (*Postgres, error) {
		p, err := ResolvePostgres(ctx, PostgresOptions{DataDir: dir, NewDataDir: newDataDir, LegacyDatabase: legacy})
		if err == nil {
			created = append(created, p.Database)
		}
		return p, err
	}

	first, second := withKey(""), withKey(strings.Repeat("o", 48)) // a fresh data dir; one set up elsewhere
	a, err := resolve(first, true)
	if err != nil {
		t.Fatal(err)
	}
	b, err := resolve(second, true)
	if err != nil {
		t.Fatal(err)
	}
	if !named.MatchString(a.Database) || !named.MatchString(b.Database) || a.Database == b.Database {
		t.Fatalf("databases %q and %q: want two different cohort_<id>", a.Database, b.Database)
	}
	for _, p := range []*Postgres{a, b} {
		if !strings.Contains(p.DatabaseURL, "/"+p.Database+"?") || p.Source != SourceLocal {
			t.Fatalf("%+v: URL does not name its database on the local server", p)
		}
		if got := queryInt(t, ctx, p.DatabaseURL, `SELECT 1`); got != 1 {
			t.Fatalf("database %s not created", p.Database)
		}
	}
	if raw, err := os.ReadFile(DatabaseFilePath(first)); err != nil || strings.TrimSpace(string(raw)) != a.Database {
		t.Fatalf("database file of the first data dir: %q %v, want %s", raw, err, a.Database)
	}
	// The next start (and cohort tenants) keeps the data dir's database.
	again, err := resolve(first, false)
	if err != nil || again.Database != a.Database {
		t.Fatalf("second resolve: %v %v, want %s", again, err, a.Database)
	}

	upgraded := withKey(legacyKey)
	u, err := resolve(upgraded, false)
	if err != nil || u.Database != legacy {
		t.Fatalf("data dir set up with the shared database: %v %v, want %s", u, err, legacy)
	}

	stray := filepath.Join(t.TempDir(), ".cohort")
	_, err = resolve(stray, false)
	var nd *NoDatabaseError
	if !errors.As(err, &nd) || !strings.Contains(err.Error(), stray) || !strings.Contains(err.Error(), "COHORT_DATA_DIR") {
		t.Fatalf("one-off command on a data dir without a database: %v, want a NoDatabaseError naming it", err)
	}
	if _, err := os.Stat(stray); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused data dir was created (%v)", err)
	}
}
