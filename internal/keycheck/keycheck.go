// Package keycheck makes sure a process runs with the secret key its database was set up with.
// Tokens signed and secrets sealed under another key are refused or unreadable later, so a
// command started with the wrong key (from the wrong directory, without the data dir that holds
// the dev key file) must stop before it mints or seals anything.
//
// The database keeps a fingerprint of the key (table secret_key_fingerprint): hex HMAC-SHA256 of a
// constant under a key derived from the secret key for this purpose alone, so the fingerprint
// reveals nothing about the key or the keys derived from it for other purposes.
package keycheck

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/cohort-dev/cohort/internal/secretbox"
)

const (
	purpose = "cohort/key-fingerprint/v1"
	message = "cohort secret key fingerprint"
)

// Fingerprint identifies secretKey without revealing it.
func Fingerprint(secretKey []byte) string {
	m := hmac.New(sha256.New, secretbox.DeriveKey(secretKey, purpose))
	m.Write([]byte(message))
	return hex.EncodeToString(m.Sum(nil))
}

// fingerprintRow mirrors the secret_key_fingerprint table (one row at most).
type fingerprintRow struct {
	Singleton   bool `gorm:"primaryKey"`
	Fingerprint string
	CreatedAt   time.Time
}

func (fingerprintRow) TableName() string { return "secret_key_fingerprint" }

// SealedData opens data the database holds sealed under the key in use (tenant.Service). It lets
// Check judge a key on a database set up before fingerprints were stored.
type SealedData interface {
	// CheckSealedKey opens one sealed value, if there is one. A key that cannot open it gives an
	// error wrapping secretbox.ErrUnknownKey or secretbox.ErrDecrypt.
	CheckSealedKey(ctx context.Context) error
}

// hint is what to do about a wrong or missing key.
const hint = "run from the directory that holds the .cohort data dir the database was set up from, " +
	"or set COHORT_DATA_DIR to that data dir, or COHORT_SECRET_KEY to the key it was set up with"

// MismatchError: the database was set up with another secret key than the one in use.
type MismatchError struct {
	KeySource string // where the key in use came from, e.g. "the dev key file /x/.cohort/secret.key"
}

func (e *MismatchError) Error() string {
	return "this database was set up with another secret key than " + e.KeySource + ": " + hint
}

// NoKeyError: there is no dev key file, and the database was already set up with a key, so a new
// one would mint tokens the server refuses and seal secrets nobody can open.
type NoKeyError struct {
	Path string // the dev key file that does not exist
}

func (e *NoKeyError) Error() string {
	return "no secret key at " + e.Path + ", but this database was already set up with one: " + hint
}

// Check compares secretKey with the key the database was set up with and returns a
// *MismatchError when they differ. On first use it records the key's fingerprint: at once on a
// database without tenants; on one with tenants (set up before fingerprints were stored) only
// once sealed can open their secrets with the key in use. keySource names the key in messages.
func Check(ctx context.Context, db *gorm.DB, secretKey []byte, sealed SealedData, keySource string) error {
	db = db.WithContext(ctx)
	want := Fingerprint(secretKey)
	got, found, err := stored(db)
	if err != nil {
		return err
	}
	if !found {
		err := sealed.CheckSealedKey(ctx)
		switch {
		case errors.Is(err, secretbox.ErrUnknownKey), errors.Is(err, secretbox.ErrDecrypt):
			return &MismatchError{KeySource: keySource}
		case err != nil:
			return fmt.Errorf("check secret key against sealed data: %w", err)
		}
		row := fingerprintRow{Singleton: true, Fingerprint: want, CreatedAt: time.Now().UTC()}
		if err := db.Clauses(clause.OnConflict{DoNothing: true}).Create(&row).Error; err != nil {
			return fmt.Errorf("store secret key fingerprint: %w", explain(err))
		}
		// Another process may have stored its key's first: compare with whatever is there.
		if got, found, err = stored(db); err != nil {
			return err
		}
		if !found {
			return errors.New("store secret key fingerprint: row missing after insert")
		}
	}
	if !hmac.Equal([]byte(got), []byte(want)) {
		return &MismatchError{KeySource: keySource}
	}
	return nil
}

// CheckRotating is Check during a rotation of the secret key (COHORT_SECRET_KEY_PREVIOUS set):
// a database set up with one of the previous keys is accepted too, and pending says so: its
// stored secrets are still sealed with that key until `cohort secret-key reseal` runs (which
// Records the new key's fingerprint).
func CheckRotating(ctx context.Context, db *gorm.DB, secretKey []byte, previous [][]byte, sealed SealedData, keySource string) (pending bool, err error) {
	if len(previous) > 0 {
		got, found, err := stored(db.WithContext(ctx))
		if err != nil {
			return false, err
		}
		for _, k := range previous {
			if found && hmac.Equal([]byte(got), []byte(Fingerprint(k))) {
				return true, nil
			}
		}
	}
	return false, Check(ctx, db, secretKey, sealed, keySource)
}

// Record stores secretKey's fingerprint as the key the database is set up with (after its
// secrets were resealed with it; db is usually that transaction).
func Record(ctx context.Context, db *gorm.DB, secretKey []byte) error {
	row := fingerprintRow{Singleton: true, Fingerprint: Fingerprint(secretKey), CreatedAt: time.Now().UTC()}
	err := db.WithContext(ctx).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "singleton"}},
		DoUpdates: clause.AssignmentColumns([]string{"fingerprint", "created_at"}),
	}).Create(&row).Error
	if err != nil {
		return fmt.Errorf("store secret key fingerprint: %w", explain(err))
	}
	return nil
}

func stored(db *gorm.DB) (fp string, found bool, err error) {
	var rows []fingerprintRow
	if err := db.Limit(1).Find(&rows).Error; err != nil {
		return "", false, fmt.Errorf("load secret key fingerprint: %w", explain(err))
	}
	if len(rows) == 0 {
		return "", false, nil
	}
	return rows[0].Fingerprint, true, nil
}

// explain turns a missing table into advice: the schema predates the fingerprint.
func explain(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" {
		return fmt.Errorf("%w (the schema lacks migration 0012: run cohort migrate)", err)
	}
	return err
}

// InUse reports whether the database was already set up with a secret key: it holds a key
// fingerprint or a tenant. A database without Cohort's tables (not migrated yet) is not in use.
func InUse(ctx context.Context, db *gorm.DB) (bool, error) {
	db = db.WithContext(ctx)
	for _, table := range []string{"secret_key_fingerprint", "tenants"} {
		var exists bool
		if err := db.Raw(`SELECT to_regclass(?) IS NOT NULL`, table).Scan(&exists).Error; err != nil {
			return false, fmt.Errorf("look for table %s: %w", table, err)
		}
		if !exists {
			continue
		}
		var rows bool
		if err := db.Raw(`SELECT EXISTS (SELECT 1 FROM ` + table + `)`).Scan(&rows).Error; err != nil {
			return false, fmt.Errorf("look for rows in %s: %w", table, err)
		}
		if rows {
			return true, nil
		}
	}
	return false, nil
}
