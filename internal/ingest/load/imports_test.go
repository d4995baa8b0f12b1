package load

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLoaderDoesNotImportSegment: the loader names property names the segment language can name
// through the leaf package ident, not by importing internal/segment (GORM, the compiler, the
// services) for one constant.
func TestLoaderDoesNotImportSegment(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "github.com/cohort-dev/cohort/internal/segment" {
			t.Fatalf("internal/ingest/load imports %s", dep)
		}
	}
}
