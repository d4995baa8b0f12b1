package devstack

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cohort-dev/cohort/internal/auth"
)

// DevSecretKeyPath is where the embedded mode keeps its secret key: <dataDir>/secret.key.
func DevSecretKeyPath(dataDir string) string { return filepath.Join(dataDir, "secret.key") }

// ReadDevSecretKey reads the embedded mode's secret key; an error wrapping fs.ErrNotExist when
// there is none yet.
func ReadDevSecretKey(dataDir string) ([]byte, error) {
	path := DevSecretKeyPath(dataDir)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read dev key: %w", err)
	}
	key := strings.TrimSpace(string(b))
	if len(key) < 32 {
		return nil, fmt.Errorf("%s: key shorter than 32 bytes", path)
	}
	return []byte(key), nil
}

// DevSecretKey returns the embedded mode's secret key: read from <dataDir>/secret.key, generated
// (0600) on first use, so that tokens minted by `cohort tenants` verify in `cohort dev`. Callers
// that may be pointed at a database set up with another key check first (keycheck.InUse), so that
// a run from the wrong directory does not make a new key.
func DevSecretKey(dataDir string) ([]byte, error) {
	path := DevSecretKeyPath(dataDir)
	if _, err := os.Stat(path); err == nil {
		return ReadDevSecretKey(dataDir)
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	key, err := auth.RandomSecret(32)
	if err != nil {
		return nil, fmt.Errorf("generate dev key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if os.IsExist(err) { // created concurrently: read theirs
			return ReadDevSecretKey(dataDir)
		}
		return nil, fmt.Errorf("write dev key: %w", err)
	}
	if _, err := f.WriteString(key + "\n"); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("write dev key: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("write dev key: %w", err)
	}
	return []byte(key), nil
}
