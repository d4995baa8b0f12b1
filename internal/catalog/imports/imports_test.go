package imports_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/blob"
	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/catalog/imports"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/store"
	"github.com/cohort-dev/cohort/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// starter records the imports Confirm starts; err makes starting fail.
type starter struct {
	mu      sync.Mutex
	started []int64
	err     error
}

func (s *starter) StartImport(_ context.Context, tenantID, jobID int64) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return "", s.err
	}
	s.started = append(s.started, jobID)
	return fmt.Sprintf("catalog-import:%d:%d", tenantID, jobID), nil
}

type fixture struct {
	ctx     context.Context
	db      *store.DB
	cat     *catalog.Service
	svc     *imports.Service
	blob    *blob.Local
	starter *starter
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	db := testenv.OpenDB(t)
	l, err := blob.NewLocal(blob.LocalConfig{Dir: t.TempDir(), BaseURL: "http://127.0.0.1", SigningKey: bytes.Repeat([]byte{7}, 32), Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	cat := catalog.NewService(db.Pool, time.Now)
	st := &starter{}
	svc := imports.NewService(db.Pool, cat, l, st, time.Now)
	return &fixture{ctx: context.Background(), db: db, cat: cat, svc: svc, blob: l, starter: st}
}

func testdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "csvimport", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (f *fixture) upload(t *testing.T, tenant int64, name string, data []byte) *imports.Job {
	t.Helper()
	job, err := f.svc.Upload(f.ctx, tenant, name, bytes.NewReader(data))
	if err != nil {
		t.Fatalf("Upload %s: %v", name, err)
	}
	if job.Status != imports.StatusMapping {
		t.Fatalf("status after upload = %q, want mapping", job.Status)
	}
	return job
}

// confirmSuggested confirms the job with the suggested schema and mapping.
func (f *fixture) confirmSuggested(t *testing.T, tenant int64, job *imports.Job) *imports.Job {
	t.Helper()
	schema := job.SuggestedSchema
	out, err := f.svc.Confirm(f.ctx, tenant, job.JobID, imports.ConfirmInput{Mapping: job.SuggestedMapping, Schema: &schema})
	if err != nil {
		t.Fatalf("Confirm: %v", err)
	}
	if out.Status != imports.StatusImporting {
		t.Fatalf("status after confirm = %q", out.Status)
	}
	return out
}

func (f *fixture) run(t *testing.T, tenant int64, job *imports.Job) *imports.Job {
	t.Helper()
	if err := f.svc.Run(f.ctx, tenant, job.JobID, nil); err != nil {
		t.Fatalf("Run: %v", err)
	}
	out, err := f.svc.Get(f.ctx, tenant, job.JobID)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (f *fixture) product(t *testing.T, tenant int64, sku string) *catalog.Product {
	t.Helper()
	page, err := f.cat.List(f.ctx, tenant, catalog.ListQuery{Page: 1, PageSize: 200})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range page.Results {
		if strings.EqualFold(p.SKU, sku) {
			return p
		}
	}
	t.Fatalf("no product %s among %d", sku, page.Total)
	return nil
}

func mapped(m map[string]*string, h string) string {
	if v, ok := m[h]; ok && v != nil {
		return *v
	}
	return "<nil>"
}

func TestShopifyExportImports(t *testing.T) {
	f := newFixture(t)
	tenant := testenv.Tenant(t, f.db, "shop")
	job := f.upload(t, tenant, "products_export_1.csv", testdata(t, "shopify_products.csv"))
	if got := mapped(job.SuggestedMapping, "Variant SKU"); got != "sku" {
		t.Fatalf("Variant SKU -> %s, want sku", got)
	}
	if got := mapped(job.SuggestedMapping, "Title"); got != "name" {
		t.Fatalf("Title -> %s, want name", got)
	}
	if len(job.SampleRows) == 0 || job.SampleRows[0]["Variant SKU"] != "NW-TEE-WHT-S" {
		t.Fatalf("sample rows: %v", job.SampleRows)
	}
	f.confirmSuggested(t, tenant, job)
	if len(f.starter.started) != 1 || f.starter.started[0] != job.JobID {
		t.Fatalf("started %v", f.starter.started)
	}
	done := f.run(t, tenant, job)
	if done.Status != imports.StatusDone || done.FinishedAt == nil {
		t.Fatalf("job after run: %+v", done)
	}
	// Every row with a Variant SKU is a product; the rest are extra images of a product.
	rd, err := os.Open(filepath.Join("..", "csvimport", "testdata", "shopify_products.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	want := countSKUs(t, rd, "Variant SKU")
	if done.Created != int64(want) || done.FailedRows != 0 || done.ProcessedRows != done.TotalRows ||
		done.ProcessedRows != done.Created+done.SkippedRows {
		t.Fatalf("created %d (want %d), failed %d %v, skipped %d, processed %d of %d",
			done.Created, want, done.FailedRows, done.Errors, done.SkippedRows, done.ProcessedRows, done.TotalRows)
	}
	// A variant row takes the product's title and vendor from its first row, keeps its own price.
	m := f.product(t, tenant, "NW-TEE-WHT-M")
	if m.Name != "Classic Cotton Tee" {
		t.Errorf("variant name %q, want the product's title", m.Name)
	}
	if m.Data["vendor"] != "Nordwind Apparel" {
		t.Errorf("variant vendor %v, want the product's", m.Data["vendor"])
	}
	if m.Data["variant_price"] != 24.9 || m.Data["option2_value"] != "White" {
		t.Errorf("variant data %v", m.Data)
	}
	if m.Data["variant_barcode"] != "4006381333948" && m.Data["variant_barcode"] != float64(4006381333948) {
		t.Errorf("variant barcode %v (its own, not the first row's)", m.Data["variant_barcode"])
	}

	// Importing the same file again changes nothing.
	job2 := f.upload(t, tenant, "again.csv", testdata(t, "shopify_products.csv"))
	f.confirmSuggested(t, tenant, job2)
	again := f.run(t, tenant, job2)
	if again.Created != 0 || again.Updated != 0 || again.Unchanged != int64(want) {
		t.Fatalf("re-import: created %d updated %d unchanged %d, want 0/0/%d", again.Created, again.Updated, again.Unchanged, want)
	}
}

func countSKUs(t *testing.T, r io.Reader, col string) int {
	t.Helper()
	data, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	rd, err := csvReader(data)
	if err != nil {
		t.Fatal(err)
	}
	idx := -1
	for i, h := range rd[0] {
		if h == col {
			idx = i
		}
	}
	n := 0
	for _, rec := range rd[1:] {
		if strings.TrimSpace(rec[idx]) != "" {
			n++
		}
	}
	return n
}

func TestEuropeanExportWithDecimalCommas(t *testing.T) {
	f := newFixture(t)
	tenant := testenv.Tenant(t, f.db, "bergwelt")
	job := f.upload(t, tenant, "artikel.csv", testdata(t, "european_semicolon.csv"))
	if job.Delimiter != ";" || mapped(job.SuggestedMapping, "Artikelnummer") != "sku" || mapped(job.SuggestedMapping, "Bezeichnung") != "name" {
		t.Fatalf("delimiter %q, mapping %v", job.Delimiter, job.SuggestedMapping)
	}
	f.confirmSuggested(t, tenant, job)
	done := f.run(t, tenant, job)
	if done.Status != imports.StatusDone || done.Created != 10 || done.FailedRows != 0 {
		t.Fatalf("job: status %s created %d failed %d %v", done.Status, done.Created, done.FailedRows, done.Errors)
	}
	p := f.product(t, tenant, "100301")
	if p.Data["preis"] != 1249.0 || p.Data["gewicht_kg"] != 3.4 || p.Data["aktiv"] != false {
		t.Fatalf("100301 data %v", p.Data)
	}
	if p.Data["erscheinungsdatum"] != "2024-02-20" {
		t.Fatalf("date %v, want 2024-02-20 (day first)", p.Data["erscheinungsdatum"])
	}
	if got := fmt.Sprint(p.Data["farben"]); got != "[Grau Orange]" {
		t.Fatalf("farben %s", got)
	}
	multi := f.product(t, tenant, "100235")
	if !strings.Contains(multi.Data["beschreibung"].(string), `"Hüftflossen"`) {
		t.Fatalf("multi-line quoted description: %q", multi.Data["beschreibung"])
	}
}

func TestBOMFile(t *testing.T) {
	f := newFixture(t)
	tenant := testenv.Tenant(t, f.db, "bom")
	job := f.upload(t, tenant, "bom.csv", testdata(t, "bom.csv"))
	if job.Headers[0] != "SKU" || mapped(job.SuggestedMapping, "SKU") != "sku" {
		t.Fatalf("headers %q mapping %v", job.Headers, job.SuggestedMapping)
	}
	f.confirmSuggested(t, tenant, job)
	done := f.run(t, tenant, job)
	if done.Status != imports.StatusDone || done.Created == 0 || done.FailedRows != 0 {
		t.Fatalf("job %+v", done)
	}
	if p := f.product(t, tenant, "BOM-001"); p.Name != "Espresso Cup" || p.Data["price"] != 4.5 {
		t.Fatalf("BOM-001: %+v", p)
	}
}

// TestBrokenRowsAreReportedByNumber: broken quotes and ragged rows are counted and reported
// with their spreadsheet row numbers; the good rows around them are imported.
func TestBrokenRowsAreReportedByNumber(t *testing.T) {
	f := newFixture(t)
	tenant := testenv.Tenant(t, f.db, "broken")
	job := f.upload(t, tenant, "broken.csv", testdata(t, "broken.csv"))
	f.confirmSuggested(t, tenant, job)
	done := f.run(t, tenant, job)
	if done.Status != imports.StatusDone {
		t.Fatalf("status %s: %s", done.Status, done.Error)
	}
	wantRows := map[int]string{
		4:  "quote",                  // SKU-3: "Bad "quote" here"
		6:  "wrong number of fields", // SKU-5: two cells
		7:  "wrong number of fields", // SKU-6: five cells
		8:  "quote",                  // SKU-7: 5" screen
		13: "quote",                  // SKU-10: a quote never closed swallows the rest
	}
	got := map[int]string{}
	for _, e := range done.Errors {
		got[e.Row] = e.Message
	}
	for row, frag := range wantRows {
		if !strings.Contains(got[row], frag) {
			t.Errorf("row %d: error %q, want one about %q (all: %v)", row, got[row], frag, done.Errors)
		}
	}
	if len(got) != len(wantRows) || done.FailedRows != int64(len(wantRows)) {
		t.Errorf("errors %v (failed_rows %d), want rows %v", done.Errors, done.FailedRows, wantRows)
	}
	for _, sku := range []string{"SKU-1", "SKU-2", "SKU-4", "SKU-8", "SKU-9"} {
		f.product(t, tenant, sku)
	}
	if done.Created != 5 {
		t.Errorf("created %d, want 5", done.Created)
	}
	if p := f.product(t, tenant, "SKU-2"); p.Name != "Multi\nline name" {
		t.Errorf("SKU-2 name %q", p.Name)
	}
}

// TestBadValuesFailTheirRow: a cell that does not fit its field fails its row (with the column
// and the value named); a product the upsert refuses (a second row with the same SKU in a chunk,
// a new product without a name) too.
func TestBadValuesFailTheirRow(t *testing.T) {
	f := newFixture(t)
	tenant := testenv.Tenant(t, f.db, "values")
	csv := "sku,name,price,launched\n" +
		"A-1,Alpha,10.50,2024-01-02\n" +
		"A-2,Beta,ten,2024-01-02\n" + // row 3: price
		"A-3,Gamma,3,not a date\n" + // row 4: date
		"A-1,Alpha again,11,2024-01-03\n" + // row 5: repeats row 2's SKU in the chunk
		"A-4,,4,2024-01-04\n" + // row 6: a new product needs a name
		",Nameless,5,2024-01-05\n" + // row 7: no SKU
		"A-5,Fine,5,2024-01-05\n"
	job := f.upload(t, tenant, "values.csv", []byte(csv))
	str := func(s string) *string { return &s }
	_, err := f.svc.Confirm(f.ctx, tenant, job.JobID, imports.ConfirmInput{
		Mapping: map[string]*string{"sku": str("sku"), "name": str("name"), "price": str("price"), "launched": str("launched")},
		Schema:  &[]catalog.Field{{Name: "price", Type: catalog.TypePrice}, {Name: "launched", Type: catalog.TypeDate}},
	})
	if err != nil {
		t.Fatal(err)
	}
	done := f.run(t, tenant, job)
	want := map[int]string{3: `"price"`, 4: `"launched"`, 5: "row 2", 6: "name", 7: "no SKU"}
	got := map[int]string{}
	for _, e := range done.Errors {
		got[e.Row] = e.Message
	}
	for row, frag := range want {
		if !strings.Contains(got[row], frag) {
			t.Errorf("row %d: %q, want it to mention %s", row, got[row], frag)
		}
	}
	if len(got) != len(want) || done.Created != 2 || done.FailedRows != 5 || done.ProcessedRows != 7 {
		t.Errorf("errors %v; created %d failed %d processed %d", done.Errors, done.Created, done.FailedRows, done.ProcessedRows)
	}
}

// bigCSV is n products whose price column has a bad value every 97th row.
func bigCSV(n int) []byte {
	var b bytes.Buffer
	b.WriteString("sku,name,price,tags\n")
	for i := 1; i <= n; i++ {
		price := fmt.Sprintf("%d.%02d", i%500, i%100)
		if i%97 == 0 {
			price = "n/a"
		}
		fmt.Fprintf(&b, "SKU-%05d,Product %d,%s,red|size-%d\n", i, i, price, i%5)
	}
	return b.Bytes()
}

// TestResumeAfterInterruption interrupts an import after a few chunks (as a worker that dies
// would) and runs it again: the job ends with exactly the counts of an uninterrupted import.
func TestResumeAfterInterruption(t *testing.T) {
	f := newFixture(t)
	f.svc.SetChunkRows(50)
	tenant := testenv.Tenant(t, f.db, "resume")
	data := bigCSV(1000)
	job := f.upload(t, tenant, "big.csv", data)
	f.confirmSuggested(t, tenant, job)
	for stop := 3; ; stop += 4 {
		ctx, cancel := context.WithCancel(f.ctx)
		chunks := 0
		err := f.svc.Run(ctx, tenant, job.JobID, func(p imports.Progress) {
			if chunks++; chunks == stop-2 { // cancel in the middle of the next chunks
				cancel()
			}
		})
		cancel()
		if err == nil {
			break
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run: %v", err)
		}
	}
	done, err := f.svc.Get(f.ctx, tenant, job.JobID)
	if err != nil {
		t.Fatal(err)
	}
	bad := int64(1000 / 97)
	if done.Status != imports.StatusDone || done.ProcessedRows != 1000 || done.TotalRows != 1000 ||
		done.Created != 1000-bad || done.FailedRows != bad || len(done.Errors) != int(bad) {
		t.Fatalf("job: %s processed %d/%d created %d failed %d errors %d", done.Status, done.ProcessedRows, done.TotalRows, done.Created, done.FailedRows, len(done.Errors))
	}
	for i, e := range done.Errors {
		if e.Row != (i+1)*97+1 {
			t.Fatalf("error %d on row %d, want %d", i, e.Row, (i+1)*97+1)
		}
	}
	if n := testenv.Count(t, f.db, `SELECT count(*) FROM products WHERE tenant_id = $1`, tenant); n != 1000-bad {
		t.Fatalf("%d products, want %d", n, 1000-bad)
	}
}

// TestConcurrentAttemptsCountOnce: two attempts of the same import running at once (a retried
// activity whose first attempt is still alive) commit each chunk once.
func TestConcurrentAttemptsCountOnce(t *testing.T) {
	f := newFixture(t)
	f.svc.SetChunkRows(25)
	tenant := testenv.Tenant(t, f.db, "twice")
	job := f.upload(t, tenant, "big.csv", bigCSV(600))
	f.confirmSuggested(t, tenant, job)
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for { // what Temporal's retries do: run again until one attempt sees the job done
				err := f.svc.Run(f.ctx, tenant, job.JobID, nil)
				if err == nil {
					return
				}
				if errors.Is(err, imports.ErrFailed) {
					t.Errorf("Run: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	done, err := f.svc.Get(f.ctx, tenant, job.JobID)
	if err != nil {
		t.Fatal(err)
	}
	bad := int64(600 / 97)
	if done.Status != imports.StatusDone || done.ProcessedRows != 600 || done.Created+done.Unchanged != 600-bad ||
		done.FailedRows != bad || len(done.Errors) != int(bad) {
		t.Fatalf("job: %s processed %d created %d unchanged %d failed %d errors %v", done.Status, done.ProcessedRows, done.Created, done.Unchanged, done.FailedRows, done.Errors)
	}
	if done.Created != 600-bad {
		t.Fatalf("created %d, want %d: a chunk was counted by two attempts", done.Created, 600-bad)
	}
}

func TestErrorsKeepTheFirstHundred(t *testing.T) {
	f := newFixture(t)
	f.svc.SetChunkRows(64)
	tenant := testenv.Tenant(t, f.db, "many-errors")
	var b bytes.Buffer
	b.WriteString("sku,name,qty\n")
	for i := 1; i <= 300; i++ {
		fmt.Fprintf(&b, "S-%d,N %d,%s\n", i, i, map[bool]string{true: "x", false: "1"}[i%2 == 0])
	}
	job := f.upload(t, tenant, "e.csv", b.Bytes())
	str := func(s string) *string { return &s }
	_, err := f.svc.Confirm(f.ctx, tenant, job.JobID, imports.ConfirmInput{
		Mapping: map[string]*string{"sku": str("sku"), "name": str("name"), "qty": str("qty")},
		Schema:  &[]catalog.Field{{Name: "qty", Type: catalog.TypeInteger}},
	})
	if err != nil {
		t.Fatal(err)
	}
	done := f.run(t, tenant, job)
	if done.FailedRows != 150 || len(done.Errors) != imports.MaxErrors || done.Errors[0].Row != 3 || done.Errors[99].Row != 201 {
		t.Fatalf("failed %d, %d errors, first row %d, last row %d", done.FailedRows, len(done.Errors), done.Errors[0].Row, done.Errors[len(done.Errors)-1].Row)
	}
}

func TestConfirmRules(t *testing.T) {
	f := newFixture(t)
	tenant := testenv.Tenant(t, f.db, "rules")
	data := []byte("sku,name,price\nA,Alpha,1\n")
	str := func(s string) *string { return &s }
	priceField := []catalog.Field{{Name: "price", Type: catalog.TypePrice}}
	tests := []struct {
		name      string
		in        imports.ConfirmInput
		wantField string // a key of the validation error's fields
	}{
		{name: "no mapping", in: imports.ConfirmInput{}, wantField: "mapping"},
		{name: "unknown header", in: imports.ConfirmInput{Mapping: map[string]*string{"sku": str("sku"), "colour": str("price")}, Schema: &priceField}, wantField: "mapping.colour"},
		{name: "unknown field", in: imports.ConfirmInput{Mapping: map[string]*string{"sku": str("sku"), "price": str("cost")}, Schema: &priceField}, wantField: "mapping.price"},
		{name: "no sku", in: imports.ConfirmInput{Mapping: map[string]*string{"name": str("name")}}, wantField: "mapping"},
		{name: "two headers on one field", in: imports.ConfirmInput{Mapping: map[string]*string{"sku": str("sku"), "name": str("sku")}}, wantField: "mapping.name"},
		{name: "bad schema", in: imports.ConfirmInput{Mapping: map[string]*string{"sku": str("sku")}, Schema: &[]catalog.Field{{Name: "price", Type: "money"}}}, wantField: "schema[0].type"},
		{name: "bad currency", in: imports.ConfirmInput{Mapping: map[string]*string{"sku": str("sku")}, DefaultCurrency: str("euro")}, wantField: "default_currency"},
	}
	job := f.upload(t, tenant, "r.csv", data)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.svc.Confirm(f.ctx, tenant, job.JobID, tt.in)
			var ve *errs.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("err = %v, want a validation error", err)
			}
			if _, ok := ve.Fields[tt.wantField]; !ok {
				t.Fatalf("fields %v, want %q", ve.Fields, tt.wantField)
			}
		})
	}
	if got, _ := f.svc.Get(f.ctx, tenant, job.JobID); got.Status != imports.StatusMapping {
		t.Fatalf("status after refused confirms: %s", got.Status)
	}

	// Starting the import fails (Temporal down): 503 and the job can be confirmed again.
	f.starter.err = fmt.Errorf("%w: temporal down", errs.ErrUnavailable)
	ok := imports.ConfirmInput{Mapping: map[string]*string{"sku": str("sku"), "name": str("name"), "price": str("price")}, Schema: &priceField, DefaultCurrency: str("EUR")}
	if _, err := f.svc.Confirm(f.ctx, tenant, job.JobID, ok); !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("confirm with Temporal down: %v", err)
	}
	if got, _ := f.svc.Get(f.ctx, tenant, job.JobID); got.Status != imports.StatusMapping {
		t.Fatalf("status after a failed start: %s", got.Status)
	}
	f.starter.err = nil
	if _, err := f.svc.Confirm(f.ctx, tenant, job.JobID, ok); err != nil {
		t.Fatal(err)
	}
	sc, _ := f.cat.Schema(f.ctx, tenant)
	if sc.DefaultCurrency != "EUR" || len(sc.Fields) != 1 || sc.Fields[0].Type != catalog.TypePrice {
		t.Fatalf("schema after confirm: %+v", sc)
	}
	var ce *errs.CodedError
	if _, err := f.svc.Confirm(f.ctx, tenant, job.JobID, ok); !errors.As(err, &ce) || ce.Code != "job_not_in_mapping" || !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("second confirm: %v", err)
	}
	f.run(t, tenant, &imports.Job{JobID: job.JobID})
	if _, err := f.svc.Confirm(f.ctx, tenant, job.JobID, ok); !errors.As(err, &ce) || ce.Code != "job_not_in_mapping" {
		t.Fatalf("confirm when done: %v", err)
	}
}

func TestTenantIsolation(t *testing.T) {
	f := newFixture(t)
	a := testenv.Tenant(t, f.db, "iso-a")
	b := testenv.Tenant(t, f.db, "iso-b")
	job := f.upload(t, a, "a.csv", []byte("sku,name\nX,Y\n"))
	if _, err := f.svc.Get(f.ctx, b, job.JobID); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("Get as b: %v", err)
	}
	sku := "sku"
	if _, err := f.svc.Confirm(f.ctx, b, job.JobID, imports.ConfirmInput{Mapping: map[string]*string{"sku": &sku}}); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("Confirm as b: %v", err)
	}
	if err := f.svc.Run(f.ctx, b, job.JobID, nil); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("Run as b: %v", err)
	}
	if got, _ := f.svc.Get(f.ctx, a, job.JobID); got.Status != imports.StatusMapping {
		t.Fatalf("a's job after b's attempts: %s", got.Status)
	}
}

func TestUploadRefusals(t *testing.T) {
	f := newFixture(t)
	tenant := testenv.Tenant(t, f.db, "refuse")
	tests := []struct {
		name string
		data io.Reader
		kind error
		code string
	}{
		{name: "empty", data: strings.NewReader(""), kind: errs.ErrInvalid, code: "bad_csv"},
		{name: "utf-16", data: bytes.NewReader([]byte{0xFF, 0xFE, 's', 0, 'k', 0, 'u', 0, '\n', 0}), kind: errs.ErrInvalid, code: "bad_csv"},
		{name: "binary", data: bytes.NewReader(bytes.Repeat([]byte{0, 1, 2, 0xff}, 1000)), kind: errs.ErrInvalid, code: "bad_csv"},
		{name: "over 200 MB", data: io.LimitReader(repeatReader("sku,name\n"), imports.MaxFileBytes+1), kind: errs.ErrTooLarge, code: "file_too_large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.svc.Upload(f.ctx, tenant, tt.name+".csv", tt.data)
			var ce *errs.CodedError
			if !errors.Is(err, tt.kind) || !errors.As(err, &ce) || ce.Code != tt.code {
				t.Fatalf("err = %v, want %v with code %s", err, tt.kind, tt.code)
			}
		})
	}
	if n := testenv.Count(t, f.db, `SELECT count(*) FROM import_jobs WHERE tenant_id = $1`, tenant); n != 0 {
		t.Fatalf("%d jobs left behind by refused uploads", n)
	}
	// Exactly 200 MB is accepted.
	job, err := f.svc.Upload(f.ctx, tenant, "exact.csv", io.LimitReader(repeatReader("sku,name\n"), imports.MaxFileBytes))
	if err != nil || job.SizeBytes != imports.MaxFileBytes {
		t.Fatalf("exactly 200 MB: %v", err)
	}
}

func csvReader(data []byte) ([][]string, error) {
	return csv.NewReader(bytes.NewReader(data)).ReadAll()
}

// repeatReader repeats s forever.
func repeatReader(s string) io.Reader {
	return &repeater{b: []byte(s)}
}

type repeater struct {
	b []byte
	i int
}

func (r *repeater) Read(p []byte) (int, error) {
	for n := range p {
		p[n] = r.b[r.i]
		r.i = (r.i + 1) % len(r.b)
	}
	return len(p), nil
}

// TestLargeImportAnalyses: an import that writes 10,000 products or more refreshes the planner's
// statistics of the products table (autovacuum may be late or off); a small one leaves it alone.
func TestLargeImportAnalyses(t *testing.T) {
	f := newFixture(t)
	analysed := func() bool {
		t.Helper()
		var at *time.Time
		if err := f.db.Pool.QueryRow(f.ctx, `SELECT last_analyze FROM pg_stat_user_tables WHERE relname = 'products'`).Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at != nil
	}
	small := testenv.Tenant(t, f.db, "small-import")
	f.run(t, small, f.confirmSuggested(t, small, f.upload(t, small, "shopify_products.csv", testdata(t, "shopify_products.csv"))))
	if analysed() {
		t.Fatal("a 15-product import analysed the products table")
	}
	var csv bytes.Buffer
	csv.WriteString("sku,name,price\n")
	for i := range 10_000 {
		fmt.Fprintf(&csv, "SKU-%05d,Product %d,%d.50\n", i, i, i%90+10)
	}
	large := testenv.Tenant(t, f.db, "large-import")
	job := f.run(t, large, f.confirmSuggested(t, large, f.upload(t, large, "large.csv", csv.Bytes())))
	if job.Status != imports.StatusDone || job.Created != 10_000 {
		t.Fatalf("large import: status %s, created %d", job.Status, job.Created)
	}
	if !analysed() {
		t.Fatal("a 10,000-product import did not analyse the products table")
	}
}

// waitLockWaiters waits until n sessions of the test database wait on a lock.
func waitLockWaiters(t *testing.T, db *store.DB, n int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := testenv.Count(t, db, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions wait on a lock after 30s, want %d", got, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestConfirmRace: two confirms of one job with different schemas, both under way before either
// has written anything (the test holds the job's row lock until both wait). Exactly one
// confirms and starts the import; the other is refused and has changed nothing: the schema is
// the winner's.
func TestConfirmRace(t *testing.T) {
	f := newFixture(t)
	tenant := testenv.Tenant(t, f.db, "race")
	job := f.upload(t, tenant, "r.csv", []byte("sku,name,price\nA,Alpha,1\n"))
	str := func(s string) *string { return &s }
	confirm := func(field string) imports.ConfirmInput {
		return imports.ConfirmInput{
			Mapping: map[string]*string{"sku": str("sku"), "name": str("name"), "price": str(field)},
			Schema:  &[]catalog.Field{{Name: field, Type: catalog.TypePrice}},
		}
	}
	hold, err := f.db.Pool.Begin(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hold.Rollback(f.ctx) }()
	if _, err := hold.Exec(f.ctx, `SELECT 1 FROM import_jobs WHERE tenant_id = $1 AND id = $2 FOR UPDATE`, tenant, job.JobID); err != nil {
		t.Fatal(err)
	}
	type result struct {
		field string
		job   *imports.Job
		err   error
	}
	results := make(chan result, 2)
	for i, field := range []string{"price_a", "price_b"} {
		go func() {
			j, err := f.svc.Confirm(f.ctx, tenant, job.JobID, confirm(field))
			results <- result{field, j, err}
		}()
		waitLockWaiters(t, f.db, int64(i+1))
	}
	if err := hold.Rollback(f.ctx); err != nil {
		t.Fatal(err)
	}
	var winner string
	refused := 0
	for range 2 {
		r := <-results
		var ce *errs.CodedError
		switch {
		case r.err == nil && winner == "" && r.job.Status == imports.StatusImporting:
			winner = r.field
		case errors.As(r.err, &ce) && ce.Code == "job_not_in_mapping" && errors.Is(r.err, errs.ErrInvalid):
			refused++
		default:
			t.Fatalf("confirm with %s: %+v, %v; want one import started and one job_not_in_mapping", r.field, r.job, r.err)
		}
	}
	if winner == "" || refused != 1 {
		t.Fatalf("winner %q, %d refused", winner, refused)
	}
	if len(f.starter.started) != 1 {
		t.Fatalf("imports started: %v, want one", f.starter.started)
	}
	sc, err := f.cat.Schema(f.ctx, tenant)
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Fields) != 1 || sc.Fields[0].Name != winner {
		t.Fatalf("schema %+v after the race, want the winner's (%s)", sc.Fields, winner)
	}
	got, err := f.svc.Get(f.ctx, tenant, job.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if mapped(got.Mapping, "price") != winner {
		t.Fatalf("job mapping %v, want the winner's", got.Mapping)
	}
}

// TestConfirmConfirmedJobLeavesSchema: confirming a job that is importing or done is refused
// and leaves the schema (fields, currency, locale) as it is, with no import started.
func TestConfirmConfirmedJobLeavesSchema(t *testing.T) {
	f := newFixture(t)
	tenant := testenv.Tenant(t, f.db, "again")
	str := func(s string) *string { return &s }
	job := f.upload(t, tenant, "r.csv", []byte("sku,name,price\nA,Alpha,1\n"))
	first := imports.ConfirmInput{Mapping: map[string]*string{"sku": str("sku"), "name": str("name"), "price": str("price")},
		Schema: &[]catalog.Field{{Name: "price", Type: catalog.TypePrice}}}
	if _, err := f.svc.Confirm(f.ctx, tenant, job.JobID, first); err != nil {
		t.Fatal(err)
	}
	before, err := f.cat.Schema(f.ctx, tenant)
	if err != nil {
		t.Fatal(err)
	}
	again := imports.ConfirmInput{Mapping: map[string]*string{"sku": str("sku"), "name": str("name"), "price": str("cost")},
		Schema: &[]catalog.Field{{Name: "cost", Type: catalog.TypeNumber}}, DefaultCurrency: str("EUR"), DefaultLocale: str("de-DE")}
	check := func(when string) {
		t.Helper()
		var ce *errs.CodedError
		if _, err := f.svc.Confirm(f.ctx, tenant, job.JobID, again); !errors.As(err, &ce) || ce.Code != "job_not_in_mapping" {
			t.Fatalf("confirm %s: %v, want job_not_in_mapping", when, err)
		}
		after, err := f.cat.Schema(f.ctx, tenant)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(after) != fmt.Sprint(before) {
			t.Fatalf("schema %s changed by a refused confirm: %+v, was %+v", when, after, before)
		}
		if len(f.starter.started) != 1 {
			t.Fatalf("imports started: %v, want only the first", f.starter.started)
		}
	}
	check("while importing")
	f.run(t, tenant, &imports.Job{JobID: job.JobID})
	check("when done")
}
