package devstack

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cohort-dev/cohort/internal/auth"
)

// DevSecretKey returns the embedded mode's secret key: read from <dataDir>/secret.key, generated
// (0600) on first use, so that tokens minted by `cohort tenants` verify in `cohort dev`.
func DevSecretKey(dataDir string) ([]byte, error) {
	path := filepath.Join(dataDir, "secret.key")
	if b, err := os.ReadFile(path); err == nil {
		key := strings.TrimSpace(string(b))
		if len(key) >= 32 {
			return []byte(key), nil
		}
		return nil, fmt.Errorf("%s: key shorter than 32 bytes", path)
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
			return DevSecretKey(dataDir)
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
