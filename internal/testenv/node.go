package testenv

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// nodeTools is NodeTools' result, shared by the tests of one binary.
var nodeTools struct {
	once sync.Once
	bin  string
	err  error
}

// SDKDir is the client library's npm package (sdk/js), found from the test's working directory
// (a package directory of this module).
func SDKDir(tb testing.TB) string {
	tb.Helper()
	dir, err := sdkDir()
	if err != nil {
		tb.Fatal(err)
	}
	return dir
}

// NodeTools returns the bin directory of the client library's npm packages
// (sdk/js/node_modules/.bin: tsc, redocly, openapi-typescript, esbuild ...; the packages
// themselves, playwright-core among them, are in its parent directory). It installs them from
// sdk/js/package-lock.json with npm ci when they are missing or older than the lockfile, holding
// a lock so that test binaries running at the same time install once. Node.js and npm must be
// installed: a test that needs them fails with the reason when they are not.
func NodeTools(tb testing.TB) string {
	tb.Helper()
	nodeTools.once.Do(func() { nodeTools.bin, nodeTools.err = installNodeTools() })
	if nodeTools.err != nil {
		tb.Fatal(nodeTools.err)
	}
	return nodeTools.bin
}

func sdkDir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			sdk := filepath.Join(dir, "sdk", "js")
			if _, err := os.Stat(filepath.Join(sdk, "package-lock.json")); err != nil {
				return "", fmt.Errorf("testenv: the client library's package is missing: %w", err)
			}
			return sdk, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("testenv: no go.mod above %s", wd)
		}
	}
}

func installNodeTools() (string, error) {
	if _, err := exec.LookPath("node"); err != nil {
		return "", errors.New("testenv: node (>= 18) is needed: install Node.js")
	}
	sdk, err := sdkDir()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(sdk, "node_modules", ".bin")
	if current(sdk) {
		return bin, nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", errors.New("testenv: npm is needed to install the client library's npm packages: install Node.js with npm")
	}
	// npm ci deletes node_modules first: two binaries running it at once would break each other.
	sum := sha256.Sum256([]byte(sdk))
	unlock, err := lockFile(filepath.Join(os.TempDir(), "cohort-npm-ci-"+hex.EncodeToString(sum[:8])+".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if current(sdk) { // another binary installed them while this one waited
		return bin, nil
	}
	cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = sdk
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("testenv: npm ci in %s: %v\n%s", sdk, err, out)
	}
	return bin, nil
}

// current reports whether node_modules was installed from the current lockfile.
func current(sdk string) bool {
	lock, err := os.Stat(filepath.Join(sdk, "package-lock.json"))
	if err != nil {
		return false
	}
	installed, err := os.Stat(filepath.Join(sdk, "node_modules", ".package-lock.json"))
	return err == nil && !installed.ModTime().Before(lock.ModTime())
}

// lockFile takes an exclusive flock on path (outside node_modules, which npm ci replaces), waiting
// for another holder; the lock goes with the process if it dies.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("testenv: lock %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	}, nil
}

// RunBrowserScript runs a Node script that drives Debian's Chromium (chromium is its path, sdk
// the client library's package, whose node_modules hold playwright-core) and returns what it
// printed on stdout. The test fails when the script fails or runs past 90 seconds, with what
// the script printed on stderr.
func RunBrowserScript(tb testing.TB, node, chromium, sdk string, args ...string) []byte {
	tb.Helper()
	cmd := exec.Command(node, args...)
	cmd.Env = append(os.Environ(), "COHORT_SDK_DIR="+sdk, "CHROMIUM="+chromium)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.Output(); close(done) }()
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		tb.Fatalf("chromium did not finish in 90 s: %s", stderr.String())
	}
	if err != nil {
		tb.Fatalf("%s in chromium: %v\n%s", filepath.Base(args[0]), err, stderr.String())
	}
	return out
}
