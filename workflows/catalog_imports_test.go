package workflows

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/cohort-dev/cohort/activities"
	"github.com/cohort-dev/cohort/internal/blob"
	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/catalog/csvimport"
	"github.com/cohort-dev/cohort/internal/catalog/imports"
	"github.com/cohort-dev/cohort/internal/store"
	"github.com/cohort-dev/cohort/internal/testenv"
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
			env := newTestEnv()
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

// importFailureCase is one CSV import that cannot complete, run end to end: the real workflow
// and activities on the embedded Temporal server, against Postgres and the local blob store.
type importFailureCase struct {
	name string
	file []byte
	// spoil runs after the confirm and before the worker starts: what goes wrong meanwhile.
	spoil        func(t *testing.T, e *importEnv, tenant, jobID int64)
	wantError    string // in the job's error
	wantProducts int64  // committed before the failure
}

type importEnv struct {
	ctx   context.Context
	db    *store.DB
	store *blob.Local
	cat   *catalog.Service
	svc   *imports.Service
}

func TestCatalogImportFailsEndToEnd(t *testing.T) {
	goodRows := func(n int) []byte {
		var b bytes.Buffer
		b.WriteString("sku,name,price\n")
		for i := range n {
			fmt.Fprintf(&b, "SKU-%d,Product %d,%d.50\n", i, i, 10+i%50)
		}
		return b.Bytes()
	}
	// 2,500 good rows (two chunks of 1,000 commit), then a quote that is never closed: the row
	// runs past csvimport.MaxRowBytes, then a row that must not be imported.
	tooLarge := goodRows(2500)
	tooLarge = append(tooLarge, `BAD,"never closed `...)
	tooLarge = append(tooLarge, bytes.Repeat([]byte("x"), csvimport.MaxRowBytes+1024)...)
	tooLarge = append(tooLarge, "\nAFTER,After the bad row,1\n"...)
	blobKey := func(tenant, jobID int64) string { return fmt.Sprintf("tenants/%d/imports/%d.csv", tenant, jobID) }
	cases := []importFailureCase{
		{
			name: "the file is gone from the blob store",
			file: goodRows(10),
			spoil: func(t *testing.T, e *importEnv, tenant, jobID int64) {
				if err := e.store.Delete(e.ctx, blobKey(tenant, jobID)); err != nil {
					t.Fatal(err)
				}
			},
			wantError: "the uploaded file is no longer in the blob store",
		},
		{
			name: "the file is no longer the CSV analysed",
			file: goodRows(10),
			spoil: func(t *testing.T, e *importEnv, tenant, jobID int64) {
				if _, err := e.store.Put(e.ctx, blobKey(tenant, jobID), strings.NewReader("\xff\xfes\x00k\x00u\x00\n\x00"), "text/csv"); err != nil {
					t.Fatal(err)
				}
			},
			wantError: "UTF-16",
		},
		{
			name: "a mapped field was removed from the schema",
			file: goodRows(10),
			spoil: func(t *testing.T, e *importEnv, tenant, _ int64) {
				if _, err := e.cat.PutSchema(e.ctx, tenant, catalog.Schema{}); err != nil {
					t.Fatal(err)
				}
			},
			wantError: `the mapping's field "price" is no longer in the schema`,
		},
		{
			name:         "a row longer than the limit mid-file",
			file:         tooLarge,
			wantError:    "row too large",
			wantProducts: 2000,
		},
	}
	db := testenv.OpenDB(t)
	tc := testenv.Temporal(t)
	store, err := blob.NewLocal(blob.LocalConfig{Dir: t.TempDir(), BaseURL: "http://127.0.0.1", SigningKey: bytes.Repeat([]byte{5}, 32), Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			queue := testenv.TaskQueue(t)
			cat := catalog.NewService(db.Pool, time.Now)
			svc := imports.NewService(db.Pool, cat, store, &Starter{Client: tc, TaskQueue: queue}, time.Now)
			e := &importEnv{ctx: context.Background(), db: db, store: store, cat: cat, svc: svc}
			tenant := testenv.Tenant(t, db, "import-fail-"+strconv.Itoa(len(tt.name))+"-"+strconv.FormatInt(time.Now().UnixNano()%1e6, 10))
			job, err := svc.Upload(e.ctx, tenant, "products.csv", bytes.NewReader(tt.file))
			if err != nil {
				t.Fatalf("upload: %v", err)
			}
			schema := job.SuggestedSchema
			if _, err := svc.Confirm(e.ctx, tenant, job.JobID, imports.ConfirmInput{Mapping: job.SuggestedMapping, Schema: &schema}); err != nil {
				t.Fatalf("confirm: %v", err)
			}
			if tt.spoil != nil {
				tt.spoil(t, e, tenant, job.JobID)
			}
			w := worker.New(tc, queue, worker.Options{})
			w.RegisterWorkflow(CatalogImport)
			w.RegisterActivity(&activities.CatalogImports{Svc: svc})
			if err := w.Start(); err != nil {
				t.Fatal(err)
			}
			defer w.Stop()

			wctx, cancel := context.WithTimeout(e.ctx, 2*time.Minute)
			defer cancel()
			var res activities.RunImportResult
			err = tc.GetWorkflow(wctx, CatalogImportID(tenant, job.JobID), "").Get(wctx, &res)
			var app *temporal.ApplicationError
			if !errors.As(err, &app) || app.Type() != activities.ErrTypeImportFailed {
				t.Fatalf("workflow: %v (result %+v), want it failed with %s", err, res, activities.ErrTypeImportFailed)
			}
			got, err := svc.Get(e.ctx, tenant, job.JobID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != imports.StatusFailed || !strings.Contains(got.Error, tt.wantError) || got.FinishedAt == nil {
				t.Fatalf("job %s, error %q, finished %v; want failed with %q", got.Status, got.Error, got.FinishedAt, tt.wantError)
			}
			t.Logf("job error: %s", got.Error)
			if strings.Contains(got.Error, "activity") || strings.Contains(got.Error, "workflow") {
				t.Errorf("job error %q carries Temporal's wording", got.Error)
			}
			products := testenv.Count(t, db, "SELECT count(*) FROM products WHERE tenant_id = $1", tenant)
			if products != tt.wantProducts || got.Created != tt.wantProducts || got.ProcessedRows != tt.wantProducts {
				t.Fatalf("%d products, job created %d of %d processed rows; want the %d committed before the failure",
					products, got.Created, got.ProcessedRows, tt.wantProducts)
			}
			if got.TotalRows == got.ProcessedRows && got.ProcessedRows > 0 {
				t.Errorf("total_rows %d equals the rows processed: the job reads as if the file was read to its end", got.TotalRows)
			}
			if n := testenv.Count(t, db, "SELECT count(*) FROM products WHERE tenant_id = $1 AND sku = 'AFTER'", tenant); n != 0 {
				t.Error("a row after the failure was imported")
			}
		})
	}
}
