package pageexport

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cohort-dev/cohort/internal/testenv"
)

func requireTool(t *testing.T, path, what string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s is missing at %s: %v", what, path, err)
	}
}

// TestTSXCompiles compiles the TSX export of a page with every block type and hostile text in
// every prop with tsc --strict (react-jsx, React declared by testdata/react.d.ts).
func TestTSXCompiles(t *testing.T) {
	tsc := filepath.Join(testenv.NodeTools(t), "tsc")
	requireTool(t, tsc, "TypeScript (sdk/js's typescript package)")
	dir := t.TempDir()
	empty := *fullContent("", "").Page
	empty.Blocks, empty.IntroCopy = nil, ""
	for name, c := range map[string]Content{
		"Full.tsx":  fullContent(hostile, "https://cohort.example"),
		"Plain.tsx": fullContent("plain words", "https://cohort.example"),
		"Empty.tsx": {Page: &empty, Tokens: Tokens{}, Tracking: TrackingFor("https://cohort.example", "pk_x")},
	} {
		body, err := RenderTSX(c)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	decl, err := filepath.Abs(filepath.Join("testdata", "react.d.ts"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(tsc, "--strict", "--jsx", "react-jsx", "--noEmit", "--target", "es2020", "--module", "esnext",
		"--moduleResolution", "bundler", "--lib", "es2020,dom", "--skipLibCheck",
		decl, filepath.Join(dir, "Full.tsx"), filepath.Join(dir, "Plain.tsx"), filepath.Join(dir, "Empty.tsx"))
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		full, _ := os.ReadFile(filepath.Join(dir, "Full.tsx"))
		t.Fatalf("tsc --strict failed: %v\n%s\n--- Full.tsx ---\n%s", err, out, full)
	}
}
