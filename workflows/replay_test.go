package workflows

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"
)

// Recorded histories of the workflows recorded since issue 24, each by the workflow's server test
// (server_test.go) with COHORT_RECORD_HISTORIES=1, with the workflow code of its time. A change
// that breaks a running execution's command sequence fails the workflow's replay test; such a
// change goes behind workflow.GetVersion, and a new recording (<name>_v1.json, recorded with the
// new code) is added beside the old one, which must keep replaying.
//
//   - activation_sync_v0.json: a manual sync: begin, push (3 added, 1 removed), finish.
//   - catalog_import_v0.json: an import that fails permanently (an invalid file), the reason
//     recorded on the job, the workflow failed.
//   - product_embeddings_v0.json: two drains (the first with more to do); lingers ended by the
//     start's own signal and by a later one (linger timers cancelled), each followed by a drain
//     finding nothing; a full linger (the timer fired) and a last empty drain.
//   - product_embeddings_v1.json: the same once the drain heartbeats (productEmbeddingsHeartbeats),
//     then a drain that finds only a leased row, the wait for its lease, the drain that takes it,
//     a full linger and a last empty drain.
//   - product_segment_compute_v0.json: a compute requested again while it ran (one more run), the
//     second run failing permanently (recorded), the workflow failed.
//   - segment_export_v0.json: an export that fails permanently, recorded on the export.
//   - segment_draft_v0.json: a first draft the validator refuses (fed back), the second saved.
var (
	activationSyncHistories        = []string{"activation_sync_v0.json"}
	catalogImportHistories         = []string{"catalog_import_v0.json"}
	productEmbeddingsHistories     = []string{"product_embeddings_v0.json", "product_embeddings_v1.json"}
	productSegmentComputeHistories = []string{"product_segment_compute_v0.json"}
	segmentExportHistories         = []string{"segment_export_v0.json"}
	segmentDraftHistories          = []string{"segment_draft_v0.json"}
)

func TestActivationSyncReplay(t *testing.T) {
	replayHistories(t, activationSyncHistories, ActivationSync)
}

func TestCatalogImportReplay(t *testing.T) {
	replayHistories(t, catalogImportHistories, CatalogImport)
}

func TestProductEmbeddingsReplay(t *testing.T) {
	replayHistories(t, productEmbeddingsHistories, ProductEmbeddings)
}

func TestProductSegmentComputeReplay(t *testing.T) {
	replayHistories(t, productSegmentComputeHistories, ProductSegmentCompute)
}

func TestSegmentExportReplay(t *testing.T) {
	replayHistories(t, segmentExportHistories, SegmentExport)
}

func TestSegmentDraftReplay(t *testing.T) {
	replayHistories(t, segmentDraftHistories, SegmentDraft)
}

// TestEveryWorkflowReplays replays every history in testdata against today's workflows (All),
// grouped by the workflow type each history started: a workflow of All without a recorded history
// fails (record one with its server test), and so does a history of a workflow All does not list.
func TestEveryWorkflowReplays(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	byType := map[string][]string{}
	for _, path := range files {
		byType[historyWorkflowType(t, path)] = append(byType[historyWorkflowType(t, path)], filepath.Base(path))
	}
	registered := map[string]bool{}
	for _, d := range All() {
		registered[d.Name] = true
		t.Run(d.Name, func(t *testing.T) {
			if len(byType[d.Name]) == 0 {
				t.Fatalf("workflow %s has no recorded history in testdata: record one with its server test (see replay_test.go)", d.Name)
			}
			replayHistories(t, byType[d.Name], d)
		})
	}
	for typ, names := range byType {
		if !registered[typ] {
			t.Errorf("histories %v are of workflow type %q, which All does not list", names, typ)
		}
	}
}

// historyWorkflowType is the workflow type a recorded history started.
func historyWorkflowType(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	hist, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	started := hist.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes()
	if started == nil {
		t.Fatalf("%s does not begin with WorkflowExecutionStarted", path)
	}
	return started.GetWorkflowType().GetName()
}

// TestAllListsEveryWorkflow: every exported function of the package taking a workflow.Context
// first (a workflow) is in All, once, so a new workflow cannot miss its replay test.
func TestAllListsEveryWorkflow(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok || fn.Recv != nil || !fn.Name.IsExported() || len(fn.Type.Params.List) == 0 {
					continue
				}
				if sel, ok := fn.Type.Params.List[0].Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "Context" {
					if id, ok := sel.X.(*ast.Ident); ok && id.Name == "workflow" {
						declared = append(declared, fn.Name.Name)
					}
				}
			}
		}
	}
	var listed []string
	for _, d := range All() {
		name := runtime.FuncForPC(reflect.ValueOf(d.Func).Pointer()).Name()
		listed = append(listed, name[strings.LastIndex(name, ".")+1:])
	}
	slices.Sort(declared)
	slices.Sort(listed)
	if !slices.Equal(declared, listed) {
		t.Errorf("workflow functions %v, All lists %v", declared, listed)
	}
	if len(declared) < 11 {
		t.Errorf("found only %d workflow functions: %v", len(declared), declared)
	}
}
