package workflows

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/cohort-dev/cohort/activities"
)

func TestCatalogImport(t *testing.T) {
	done := activities.RunImportResult{Status: "done", ProcessedRows: 100, Created: 90, FailedRows: 10}
	cases := []struct {
		name         string
		runErrs      []error // what RunImport returns on each attempt; after them it succeeds
		wantAttempts int
		wantFail     string // the reason FailImport records; "" means it is not called
	}{
		{name: "imports", wantAttempts: 1},
		{name: "a crashed attempt is retried and resumes", runErrs: []error{errors.New("connection reset by peer"), errors.New("conn closed")}, wantAttempts: 3},
		{
			name:         "a file that cannot be imported fails the job at once",
			runErrs:      []error{temporal.NewNonRetryableApplicationError("import failed: row 7 is longer than 16 MiB", activities.ErrTypeImportFailed, nil)},
			wantAttempts: 1,
			wantFail:     "import failed: row 7 is longer than 16 MiB",
		},
		{
			name:         "retries run out: the job fails with the last error",
			runErrs:      repeatErr(importMaxAttempts, errors.New("database is down")),
			wantAttempts: importMaxAttempts,
			wantFail:     "database is down",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			env.RegisterActivity(&activities.CatalogImports{})
			var (
				mu       sync.Mutex
				attempts int
				fails    []activities.FailImportInput
			)
			env.OnActivity(catalogImports.RunImport, mock.Anything, mock.Anything).Return(
				func(ctx context.Context, in activities.RunImportInput) (activities.RunImportResult, error) {
					mu.Lock()
					defer mu.Unlock()
					attempts++
					if int(activity.GetInfo(ctx).Attempt) != attempts {
						t.Errorf("attempt %d reported as %d", attempts, activity.GetInfo(ctx).Attempt)
					}
					if in != (activities.RunImportInput{TenantID: testTenant, JobID: 9}) {
						t.Errorf("input %+v", in)
					}
					if attempts <= len(tc.runErrs) {
						return activities.RunImportResult{}, tc.runErrs[attempts-1]
					}
					return done, nil
				})
			env.OnActivity(catalogImports.FailImport, mock.Anything, mock.Anything).Return(
				func(_ context.Context, in activities.FailImportInput) error {
					mu.Lock()
					defer mu.Unlock()
					fails = append(fails, in)
					return nil
				})
			env.ExecuteWorkflow(CatalogImport, CatalogImportInput{TenantID: testTenant, JobID: 9})
			if !env.IsWorkflowCompleted() {
				t.Fatal("workflow did not complete")
			}
			if attempts != tc.wantAttempts {
				t.Fatalf("%d attempts, want %d", attempts, tc.wantAttempts)
			}
			err := env.GetWorkflowError()
			if tc.wantFail == "" {
				if err != nil || len(fails) != 0 {
					t.Fatalf("err %v, fails %v", err, fails)
				}
				var res activities.RunImportResult
				if err := env.GetWorkflowResult(&res); err != nil || res != done {
					t.Fatalf("result %+v (%v)", res, err)
				}
				return
			}
			if len(fails) != 1 || fails[0].JobID != 9 || fails[0].TenantID != testTenant || !strings.Contains(fails[0].Reason, tc.wantFail) {
				t.Fatalf("FailImport calls %+v, want one with %q", fails, tc.wantFail)
			}
			var app *temporal.ApplicationError
			if !errors.As(err, &app) || app.Type() != activities.ErrTypeImportFailed {
				t.Fatalf("workflow error %v, want %s", err, activities.ErrTypeImportFailed)
			}
		})
	}
}

func repeatErr(n int, err error) []error {
	out := make([]error, n)
	for i := range out {
		out[i] = err
	}
	return out
}

func TestCatalogImportID(t *testing.T) {
	if got := CatalogImportID(4, 77); got != "catalog-import:4:77" {
		t.Fatal(got)
	}
}
