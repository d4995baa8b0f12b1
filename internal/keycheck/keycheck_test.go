package keycheck_test

import (
	"context"
	"encoding/hex"
	"errors"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cohort-dev/cohort/internal/keycheck"
	"github.com/cohort-dev/cohort/internal/secretbox"
	"github.com/cohort-dev/cohort/internal/store"
	"github.com/cohort-dev/cohort/internal/tenant"
	"github.com/cohort-dev/cohort/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var (
	keyA = []byte("keycheck-test-secret-key-a-0123456789")
	keyB = []byte("keycheck-test-secret-key-b-0123456789")
)

// tenants is the tenant service as a process started with secretKey builds it (cmd/cohort openCore).
func tenants(t *testing.T, db *store.DB, secretKey []byte) *tenant.Service {
	t.Helper()
	k := secretbox.DeriveKey(secretKey, "cohort/secretbox/v1")
	box, err := secretbox.New(map[string][]byte{secretbox.KeyID(k): k}, secretbox.KeyID(k))
	if err != nil {
		t.Fatal(err)
	}
	return tenant.NewService(db.Gorm, box, time.Now)
}

func storedFingerprint(t *testing.T, db *store.DB) (string, bool) {
	t.Helper()
	var fp string
	err := db.Pool.QueryRow(context.Background(), `SELECT fingerprint FROM secret_key_fingerprint`).Scan(&fp)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return fp, true
}

func wantMismatch(t *testing.T, err error, source string) {
	t.Helper()
	var me *keycheck.MismatchError
	if !errors.As(err, &me) {
		t.Fatalf("err = %v, want a *keycheck.MismatchError", err)
	}
	for _, want := range []string{"another secret key", source, "COHORT_DATA_DIR", "COHORT_SECRET_KEY", ".cohort"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
}

func TestFingerprint(t *testing.T) {
	a, b := keycheck.Fingerprint(keyA), keycheck.Fingerprint(keyB)
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(a) {
		t.Fatalf("fingerprint %q is not 64 hex characters", a)
	}
	if a != keycheck.Fingerprint(keyA) {
		t.Fatal("fingerprint of the same key differs")
	}
	if a == b {
		t.Fatal("two keys share a fingerprint")
	}
	// Neither the key nor a key derived from it for another purpose shows in the fingerprint.
	for _, secret := range [][]byte{keyA, secretbox.DeriveKey(keyA, "cohort/secretbox/v1"), secretbox.DeriveKey(keyA, "cohort/jwt/v1")} {
		for _, enc := range []string{string(secret), hex.EncodeToString(secret)} {
			if strings.Contains(a, enc[:16]) {
				t.Fatalf("fingerprint %s reveals key material %q", a, enc)
			}
		}
	}
}

func TestCheck(t *testing.T) {
	ctx := context.Background()
	const sourceA, sourceB = "the dev key file /a/.cohort/secret.key", "COHORT_SECRET_KEY"

	t.Run("first use stores the fingerprint, then the same key passes", func(t *testing.T) {
		db := testenv.OpenDB(t)
		if _, ok := storedFingerprint(t, db); ok {
			t.Fatal("a fresh database already holds a fingerprint")
		}
		if err := keycheck.Check(ctx, db.Gorm, keyA, tenants(t, db, keyA), sourceA); err != nil {
			t.Fatalf("first use: %v", err)
		}
		fp, ok := storedFingerprint(t, db)
		if !ok || fp != keycheck.Fingerprint(keyA) {
			t.Fatalf("stored fingerprint %q (%v), want %q", fp, ok, keycheck.Fingerprint(keyA))
		}
		if strings.Contains(fp, string(keyA)) || strings.Contains(fp, hex.EncodeToString(keyA)) {
			t.Fatal("the key itself was stored")
		}
		for range 2 {
			if err := keycheck.Check(ctx, db.Gorm, keyA, tenants(t, db, keyA), sourceA); err != nil {
				t.Fatalf("same key again: %v", err)
			}
		}
	})

	t.Run("another key is refused and changes nothing", func(t *testing.T) {
		db := testenv.OpenDB(t)
		if err := keycheck.Check(ctx, db.Gorm, keyA, tenants(t, db, keyA), sourceA); err != nil {
			t.Fatal(err)
		}
		err := keycheck.Check(ctx, db.Gorm, keyB, tenants(t, db, keyB), sourceB)
		wantMismatch(t, err, sourceB)
		if fp, _ := storedFingerprint(t, db); fp != keycheck.Fingerprint(keyA) {
			t.Fatalf("fingerprint changed to %q", fp)
		}
	})

	t.Run("database set up before fingerprints: judged by its sealed tenant secrets", func(t *testing.T) {
		db := testenv.OpenDB(t)
		if _, err := tenants(t, db, keyA).Create(ctx, "acme", ""); err != nil {
			t.Fatal(err)
		}
		err := keycheck.Check(ctx, db.Gorm, keyB, tenants(t, db, keyB), sourceB)
		wantMismatch(t, err, sourceB)
		if _, ok := storedFingerprint(t, db); ok {
			t.Fatal("a wrong key's fingerprint was stored")
		}
		if err := keycheck.Check(ctx, db.Gorm, keyA, tenants(t, db, keyA), sourceA); err != nil {
			t.Fatalf("the key the tenants were sealed with: %v", err)
		}
		if fp, _ := storedFingerprint(t, db); fp != keycheck.Fingerprint(keyA) {
			t.Fatalf("stored fingerprint %q, want key A's", fp)
		}
		wantMismatch(t, keycheck.Check(ctx, db.Gorm, keyB, tenants(t, db, keyB), sourceB), sourceB)
	})

	t.Run("tenants without sealed secrets give nothing to judge by: first key wins", func(t *testing.T) {
		db := testenv.OpenDB(t)
		testenv.Tenant(t, db, "bare") // placeholder secrets, as domain tests insert
		if err := keycheck.Check(ctx, db.Gorm, keyB, tenants(t, db, keyB), sourceB); err != nil {
			t.Fatal(err)
		}
		wantMismatch(t, keycheck.Check(ctx, db.Gorm, keyA, tenants(t, db, keyA), sourceA), sourceA)
	})

	t.Run("concurrent first uses with different keys: one wins, the other is refused", func(t *testing.T) {
		db := testenv.OpenDB(t)
		var wg sync.WaitGroup
		errsByKey := make([]error, 2)
		for i, k := range [][]byte{keyA, keyB} {
			wg.Go(func() { errsByKey[i] = keycheck.Check(ctx, db.Gorm, k, tenants(t, db, k), "key") })
		}
		wg.Wait()
		if (errsByKey[0] == nil) == (errsByKey[1] == nil) {
			t.Fatalf("errors %v; want exactly one key accepted", errsByKey)
		}
		winner := keyA
		if errsByKey[0] != nil {
			winner = keyB
		}
		if fp, _ := storedFingerprint(t, db); fp != keycheck.Fingerprint(winner) {
			t.Fatalf("stored fingerprint is not the accepted key's")
		}
	})
}

func TestCheckWithoutTheMigration(t *testing.T) {
	db := testenv.OpenDB(t)
	testenv.Exec(t, db, `DROP TABLE secret_key_fingerprint`)
	err := keycheck.Check(context.Background(), db.Gorm, keyA, tenants(t, db, keyA), "key")
	if err == nil || !strings.Contains(err.Error(), "cohort migrate") {
		t.Fatalf("err = %v, want advice to run cohort migrate", err)
	}
}

func TestInUse(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name  string
		setup func(t *testing.T, db *store.DB)
		want  bool
	}{
		{name: "fresh migrated database", setup: func(*testing.T, *store.DB) {}},
		{name: "a fingerprint", setup: func(t *testing.T, db *store.DB) {
			if err := keycheck.Check(ctx, db.Gorm, keyA, tenants(t, db, keyA), "key"); err != nil {
				t.Fatal(err)
			}
		}, want: true},
		{name: "a tenant", setup: func(t *testing.T, db *store.DB) { testenv.Tenant(t, db, "acme") }, want: true},
		{name: "a tenant, without the fingerprint table (before migration 0012)", setup: func(t *testing.T, db *store.DB) {
			testenv.Tenant(t, db, "acme")
			testenv.Exec(t, db, `DROP TABLE secret_key_fingerprint`)
		}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := testenv.OpenDB(t)
			tt.setup(t, db)
			got, err := keycheck.InUse(ctx, db.Gorm)
			if err != nil || got != tt.want {
				t.Fatalf("InUse = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
	t.Run("database without Cohort's tables", func(t *testing.T) {
		db := emptyDatabase(t)
		got, err := keycheck.InUse(ctx, db.Gorm)
		if err != nil || got {
			t.Fatalf("InUse = %v, %v; want false", got, err)
		}
	})
}

// emptyDatabase is a new database without any migration applied, dropped when the test ends.
func emptyDatabase(t *testing.T) *store.DB {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, testenv.Server(t).AdminURL)
	if err != nil {
		t.Fatal(err)
	}
	name := "cohort_keycheck_empty_" + strings.ReplaceAll(time.Now().Format("150405.000000"), ".", "_")
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
		_ = admin.Close(context.Background())
	})
	u, err := url.Parse(testenv.Server(t).AdminURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	db, err := store.Open(ctx, u.String(), store.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db
}

// During a rotation the new key is accepted on a database set up with a previous one (pending),
// and once Record stores the new fingerprint, the old key is refused.
func TestCheckRotating(t *testing.T) {
	ctx := context.Background()
	db := testenv.OpenDB(t)
	if err := keycheck.Check(ctx, db.Gorm, keyA, tenants(t, db, keyA), "old"); err != nil {
		t.Fatal(err)
	}
	wantMismatch(t, keycheck.Check(ctx, db.Gorm, keyB, tenants(t, db, keyB), "COHORT_SECRET_KEY"), "COHORT_SECRET_KEY")
	pending, err := keycheck.CheckRotating(ctx, db.Gorm, keyB, [][]byte{keyA}, tenants(t, db, keyB), "COHORT_SECRET_KEY")
	if err != nil || !pending {
		t.Fatalf("new key with the old one as previous: pending %v, %v; want pending", pending, err)
	}
	if err := keycheck.Record(ctx, db.Gorm, keyB); err != nil {
		t.Fatal(err)
	}
	if fp, _ := storedFingerprint(t, db); fp != keycheck.Fingerprint(keyB) {
		t.Fatalf("fingerprint after Record = %s, want keyB's", fp)
	}
	pending, err = keycheck.CheckRotating(ctx, db.Gorm, keyB, [][]byte{keyA}, tenants(t, db, keyB), "COHORT_SECRET_KEY")
	if err != nil || pending {
		t.Fatalf("after Record: pending %v, %v; want done", pending, err)
	}
	if err := keycheck.Check(ctx, db.Gorm, keyB, tenants(t, db, keyB), "COHORT_SECRET_KEY"); err != nil {
		t.Fatalf("new key alone after Record: %v", err)
	}
	wantMismatch(t, keycheck.Check(ctx, db.Gorm, keyA, tenants(t, db, keyA), "old"), "old")
}
