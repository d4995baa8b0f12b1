package devstack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cohort-dev/cohort/internal/keycheck"
)

// DatabaseFilePath is where a data dir names its database on a local or private server:
// <dataDir>/database, one line such as cohort_1a2b3c4d.
func DatabaseFilePath(dataDir string) string { return filepath.Join(dataDir, "database") }

// NoDatabaseError: the data dir has no database of its own yet, and the caller may not make one
// (a one-off command run from a directory without the running cohort dev's data dir would
// otherwise work on a new, empty database the running server never sees).
type NoDatabaseError struct {
	DataDir string
}

func (e *NoDatabaseError) Error() string {
	return "the data dir " + e.DataDir + " has no database yet: run from the directory that holds the .cohort data dir " +
		"cohort dev uses, or set COHORT_DATA_DIR to it (or DATABASE_URL); cohort dev started here makes a new one"
}

var databaseName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// DataDirDatabase names the database a data dir uses on the server behind adminURL: the one its
// database file names; else, for a data dir from before each had its own, legacy (default
// "cohort") when that database was set up with the data dir's dev secret key, so upgrading users
// keep their data; else, when create is set, a new cohort_<8 hex digits>, written to the file.
// Without create, a data dir with neither is a *NoDatabaseError.
func DataDirDatabase(ctx context.Context, adminURL, dataDir, legacy string, create bool) (string, error) {
	if dataDir == "" {
		return "", errors.New("postgres: no data directory to name the database after")
	}
	if legacy == "" {
		legacy = "cohort"
	}
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return "", fmt.Errorf("data dir: %w", err)
	}
	path := DatabaseFilePath(abs)
	if name, err := readDatabaseFile(path); !errors.Is(err, fs.ErrNotExist) {
		return name, err
	}
	name := ""
	if key, err := ReadDevSecretKey(abs); err == nil {
		ok, err := setUpWithKey(ctx, adminURL, legacy, key)
		if err != nil {
			return "", err
		}
		if ok {
			name = legacy
		}
	}
	if name == "" {
		if !create {
			return "", &NoDatabaseError{DataDir: abs}
		}
		id := make([]byte, 4)
		if _, err := rand.Read(id); err != nil {
			return "", fmt.Errorf("database id: %w", err)
		}
		name = "cohort_" + hex.EncodeToString(id)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return "", fmt.Errorf("create data dir: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		if os.IsExist(err) { // named concurrently (cohort tenants while cohort dev starts): use theirs
			return readDatabaseFile(path)
		}
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.WriteString(name + "\n"); err != nil {
		_ = f.Close()
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return name, nil
}

func readDatabaseFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read database name: %w", err)
	}
	name := strings.TrimSpace(string(b))
	if !databaseName.MatchString(name) {
		return "", fmt.Errorf("%s: %q is not a database name (lower-case letters, digits, _)", path, name)
	}
	return name, nil
}

// setUpWithKey reports whether the database db exists on the server behind adminURL and holds the
// fingerprint of key (keycheck) as the key it was set up with.
func setUpWithKey(ctx context.Context, adminURL, db string, key []byte) (bool, error) {
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return false, fmt.Errorf("connect to postgres: %w", err)
	}
	var exists bool
	err = admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, db).Scan(&exists)
	_ = admin.Close(context.Background())
	if err != nil {
		return false, fmt.Errorf("check database %s: %w", db, err)
	}
	if !exists {
		return false, nil
	}
	conn, err := pgx.Connect(ctx, withDatabase(adminURL, db))
	if err != nil {
		return false, fmt.Errorf("connect to database %s: %w", db, err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	var fp string
	err = conn.QueryRow(ctx, `SELECT fingerprint FROM secret_key_fingerprint LIMIT 1`).Scan(&fp)
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows), errors.As(err, &pgErr) && pgErr.Code == "42P01": // no key recorded, or not migrated
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read the secret key fingerprint of database %s: %w", db, err)
	}
	return fp == keycheck.Fingerprint(key), nil
}
