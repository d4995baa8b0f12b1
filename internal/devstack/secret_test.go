package devstack

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadDevSecretKey(t *testing.T) {
	t.Run("missing: not-exist error and nothing created", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), ".cohort")
		if _, err := ReadDevSecretKey(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("err = %v, want fs.ErrNotExist", err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("reading created %s (%v)", dir, err)
		}
	})
	t.Run("reads what DevSecretKey made", func(t *testing.T) {
		dir := t.TempDir()
		made, err := DevSecretKey(dir)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ReadDevSecretKey(dir)
		if err != nil || string(got) != string(made) {
			t.Fatalf("ReadDevSecretKey = %q, %v; want %q", got, err, made)
		}
		if DevSecretKeyPath(dir) != filepath.Join(dir, "secret.key") {
			t.Fatalf("DevSecretKeyPath = %s", DevSecretKeyPath(dir))
		}
	})
	t.Run("short key refused", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(DevSecretKeyPath(dir), []byte("short\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, read := range []func(string) ([]byte, error){ReadDevSecretKey, DevSecretKey} {
			if _, err := read(dir); err == nil || !strings.Contains(err.Error(), "shorter than 32 bytes") {
				t.Fatalf("err = %v, want a short-key error", err)
			}
		}
	})
}
