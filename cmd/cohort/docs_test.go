package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestDocsCiteTheContract: code and docs cite api/openapi.yaml, the contract in the repository,
// never a specification document that is not in it.
func TestDocsCiteTheContract(t *testing.T) {
	spec := regexp.MustCompile(`\bSP` + `EC\b`) // split so this file does not match itself
	var hits []string
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "dist", ".cohort":
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".md", ".yaml", ".yml", ".ts", ".js":
		default:
			return nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(raw), "\n") {
			if spec.MatchString(line) {
				hits = append(hits, path+":"+strconv.Itoa(i+1)+": "+strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) > 0 {
		t.Fatalf("references to a spec that is not in the repository (cite api/openapi.yaml):\n%s", strings.Join(hits, "\n"))
	}
}

// TestInternalREADMEListsPackages: internal/README.md names every package under internal/ and
// states the GORM or pgx rule.
func TestInternalREADMEListsPackages(t *testing.T) {
	raw, err := os.ReadFile("../../internal/README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	entries, err := os.ReadDir("../../internal")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() && !strings.Contains(readme, "`"+e.Name()+"`") {
			t.Errorf("internal/README.md does not list internal/%s", e.Name())
		}
	}
	if !strings.Contains(readme, "## GORM or pgx") {
		t.Error("internal/README.md lacks the GORM or pgx rule")
	}
}
