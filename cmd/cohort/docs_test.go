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

// TestREADMECallsAreInTheContract: the README has a section for semantic search, the design
// system, templates and exports, and every API path its curl examples call is an operation of
// api/openapi.yaml.
func TestREADMECallsAreInTheContract(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	contract, err := os.ReadFile("../../api/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"## Semantic product search", "### Design system", "### Page templates", "### Page exports"} {
		if !strings.Contains(string(readme), "\n"+h+"\n") {
			t.Errorf("README.md lacks the section %q", h)
		}
	}
	var paths []*regexp.Regexp
	for _, m := range regexp.MustCompile(`(?m)^  (/[^:\s]*):\s*$`).FindAllStringSubmatch(string(contract), -1) {
		re := regexp.QuoteMeta(m[1])
		re = regexp.MustCompile(`\\\{[a-z_]+\\\}`).ReplaceAllString(re, `[^/]+`)
		paths = append(paths, regexp.MustCompile("^"+re+"$"))
	}
	if len(paths) < 50 {
		t.Fatalf("read only %d paths from api/openapi.yaml", len(paths))
	}
	// A path followed by $ goes on with a shell expansion ($(jq .job_id job.json)): not checked.
	calls := regexp.MustCompile(`localhost:8080(/api/[^\s"'?$)]*)(\$?)`).FindAllStringSubmatch(string(readme), -1)
	if len(calls) < 20 {
		t.Fatalf("found only %d API calls in README.md", len(calls))
	}
	for _, c := range calls {
		if c[2] == "$" {
			continue
		}
		found := false
		for _, p := range paths {
			found = found || p.MatchString(c[1])
		}
		if !found {
			t.Errorf("README.md calls %s, which api/openapi.yaml does not have", c[1])
		}
	}
}
