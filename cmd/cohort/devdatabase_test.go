package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cohort-dev/cohort/internal/config"
	"github.com/cohort-dev/cohort/internal/keycheck"
)

// TestSecondDataDirStartsOnTheSameServer: without DATABASE_URL, a second data dir (after
// rm -rf .cohort, or a second clone) on the same Postgres gets its own database instead of the one
// the first data dir set up with its key, so both pass the key check; the banner names each one's
// database. With DATABASE_URL naming a database set up with another key, the refusal stays.
func TestSecondDataDirStartsOnTheSameServer(t *testing.T) {
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	var urls []string
	t.Cleanup(func() {
		admin, err := pgx.Connect(ctx, "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable")
		if err != nil {
			return
		}
		defer func() { _ = admin.Close(ctx) }()
		for _, u := range urls {
			name := u[strings.LastIndex(u, "/")+1:]
			name = strings.SplitN(name, "?", 2)[0]
			_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
		}
	})
	start := func(dataDir, databaseURL string) (*config.Config, string, error) {
		cfg, err := config.Load(func(k string) (string, bool) {
			switch k {
			case "COHORT_DATA_DIR":
				return dataDir, true
			case "DATABASE_URL":
				return databaseURL, databaseURL != ""
			}
			return "", false
		})
		if err != nil {
			t.Fatal(err)
		}
		pg, err := resolveEmbeddedDeps(ctx, cfg, logger, true)
		if err != nil {
			return nil, "", err
		}
		defer func() { _ = pg.Close() }()
		if databaseURL == "" {
			urls = append(urls, cfg.DatabaseURL)
		}
		c, err := openCore(ctx, cfg, logger, coreOptions{migrate: true}) // migrations, then the key check
		if err != nil {
			return nil, "", err
		}
		defer c.close()
		if _, err := c.tenants.Create(ctx, "acme", "Acme"); err != nil { // the database is now in use
			return nil, "", err
		}
		return cfg, databaseBanner(pg, cfg.DatabaseURL), nil
	}

	first, firstBanner, err := start(filepath.Join(t.TempDir(), ".cohort"), "")
	if err != nil {
		t.Fatalf("first data dir: %v", err)
	}
	second, secondBanner, err := start(filepath.Join(t.TempDir(), ".cohort"), "")
	if err != nil {
		t.Fatalf("second data dir on the same server: %v", err)
	}
	if first.DatabaseURL == second.DatabaseURL {
		t.Fatalf("both data dirs use %s", first.DatabaseURL)
	}
	for _, tc := range []struct{ banner, url string }{{firstBanner, first.DatabaseURL}, {secondBanner, second.DatabaseURL}} {
		name := strings.SplitN(tc.url[strings.LastIndex(tc.url, "/")+1:], "?", 2)[0]
		if !strings.HasPrefix(tc.banner, name+"  [local server") || !strings.HasPrefix(name, "cohort_") {
			t.Errorf("banner %q does not name the database %s", tc.banner, name)
		}
	}

	// DATABASE_URL is used as given: the first data dir's database with the second's key is refused.
	_, _, err = start(filepath.Dir(second.DataDir)+"/.cohort", first.DatabaseURL)
	var mismatch *keycheck.MismatchError
	if !errors.As(err, &mismatch) {
		t.Fatalf("DATABASE_URL set up with another key: %v, want a key mismatch", err)
	}
}
