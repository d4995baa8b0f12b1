package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/page"
	"github.com/cohort-dev/cohort/internal/pagegen"
	"github.com/cohort-dev/cohort/internal/search"
)

// fakeSearch answers every search with its products or its error.
type fakeSearch struct {
	products   []search.Product
	err        error
	got        search.In
	backlog    search.Backlog
	backlogErr error
}

func (f *fakeSearch) Backlog(context.Context, int64, *int64) (search.Backlog, error) {
	return f.backlog, f.backlogErr
}

func (f *fakeSearch) Search(_ context.Context, _ int64, in search.In) (*search.Result, error) {
	f.got = in
	if f.err != nil {
		return nil, f.err
	}
	return &search.Result{Products: f.products}, nil
}

// fakeStore is a PageStore whose every method returns err.
type fakeStore struct {
	err     error
	saved   []page.GeneratedContent
	fails   []string
	pending []int64
}

func (f *fakeStore) SetPendingEmbeddings(_ context.Context, _, _, n int64) error {
	f.pending = append(f.pending, n)
	return f.err
}

func (f *fakeStore) GenerationTarget(context.Context, int64, int64) (*page.GenerationTarget, error) {
	return nil, f.err
}
func (f *fakeStore) MarkGenerating(context.Context, int64, int64) error { return f.err }
func (f *fakeStore) SaveGenerated(_ context.Context, _, _ int64, g page.GeneratedContent) error {
	f.saved = append(f.saved, g)
	return f.err
}
func (f *fakeStore) MarkGenerationFailed(_ context.Context, _, _ int64, msg string) error {
	f.fails = append(f.fails, msg)
	return f.err
}
func (f *fakeStore) MarkBulkRunning(context.Context, int64, int64) error { return f.err }
func (f *fakeStore) BulkPages(context.Context, int64, int64) ([]page.BulkJobPage, error) {
	return nil, f.err
}
func (f *fakeStore) FinishBulkPage(context.Context, int64, int64, int64, error) error { return f.err }
func (f *fakeStore) FinishBulk(context.Context, int64, int64) (*page.BulkJob, error) {
	return nil, f.err
}

func wantAppErr(t *testing.T, err error, typ string, nonRetryable bool) *temporal.ApplicationError {
	t.Helper()
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != typ || app.NonRetryable() != nonRetryable {
		t.Fatalf("error %v, want application error %s (non-retryable %v)", err, typ, nonRetryable)
	}
	return app
}

func TestSearchPageProducts(t *testing.T) {
	seg := int64(12)
	in := SearchPageProductsInput{TenantID: 1, PageID: 2, Query: "linen dress", Limit: 12, ProductSegmentID: &seg}
	ctx := context.Background()

	found := &fakeSearch{products: []search.Product{
		{ID: 1, SKU: "A", Name: "Linen dress", Data: json.RawMessage(`{"material": "linen", "nested": {"x": 1}}`)},
		{ID: 2, SKU: "B", Name: "Cotton dress"},
	}}
	res, err := NewPages(&fakeStore{}, found, nil).SearchPageProducts(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if found.got.Query != "linen dress" || found.got.Limit != 12 || found.got.SegmentID != &seg {
		t.Errorf("search %+v", found.got)
	}
	if len(res.Products) != 2 || res.Products[0].Data["material"] != "linen" || res.Products[0].Data["nested"] != nil {
		t.Errorf("products %+v, want them compacted", res.Products)
	}

	gone := &fakeSearch{err: fmt.Errorf("product segment 12: %w", errs.ErrNotFound)}
	_, err = NewPages(&fakeStore{}, gone, nil).SearchPageProducts(ctx, in)
	if app := wantAppErr(t, err, ErrTypeProductSegmentGone, true); app.Message() != "product segment 12 of the AIQuery no longer exists" {
		t.Errorf("message %q", app.Message())
	}

	// Nothing found: the message says why, from the backlog of the products it could match.
	for _, tc := range []struct {
		name    string
		backlog search.Backlog
		want    string
	}{
		{"empty segment", search.Backlog{}, "no product matches the query: product segment 12 has no member"},
		{"all queued", search.Backlog{Products: 5, Queued: 5},
			"no product matches the query: none of the 5 products of product segment 12 is embedded yet (5 still queued for an embedding); regenerate once they are embedded"},
		{"all refused", search.Backlog{Products: 2, Refused: 2},
			"no product matches the query: the embedding provider refused the texts of the 2 products of product segment 12 that have no embedding"},
		{"embedded", search.Backlog{Products: 3, Embedded: 3},
			`no product matches the query "linen dress" among the 3 embedded products of product segment 12`},
	} {
		_, err = NewPages(&fakeStore{}, &fakeSearch{backlog: tc.backlog}, nil).SearchPageProducts(ctx, in)
		if app := wantAppErr(t, err, ErrTypePageNoProducts, true); app.Message() != tc.want {
			t.Errorf("%s: message %q, want %q", tc.name, app.Message(), tc.want)
		}
	}
	_, err = NewPages(&fakeStore{}, &fakeSearch{backlog: search.Backlog{Products: 4, Queued: 4}}, nil).SearchPageProducts(ctx,
		SearchPageProductsInput{TenantID: 1, PageID: 2, Query: "linen dress", Limit: 12})
	if app := wantAppErr(t, err, ErrTypePageNoProducts, true); app.Message() != "no product matches the query: none of the 4 products of the catalogue is embedded yet (4 still queued for an embedding); regenerate once they are embedded" {
		t.Errorf("whole catalogue: message %q", app.Message())
	}

	// A query the search cannot embed: the message names it, not the catalogue.
	noWords := &fakeSearch{err: errs.Invalid("q", search.NoWordsMessage)}
	_, err = NewPages(&fakeStore{}, noWords, nil).SearchPageProducts(ctx, SearchPageProductsInput{TenantID: 1, PageID: 2, Query: "?!", Limit: 12})
	if app := wantAppErr(t, err, ErrTypePageQueryNoWords, true); app.Message() != `the AIQuery's text "?!" `+search.NoWordsMessage {
		t.Errorf("message %q", app.Message())
	}

	down := &fakeSearch{err: errs.Coded(errs.ErrUnavailable, search.CodeEmbeddingUnavailable, "the embedding service is unavailable")}
	_, err = NewPages(&fakeStore{}, down, nil).SearchPageProducts(ctx, in)
	var app *temporal.ApplicationError
	if err == nil || errors.As(err, &app) || !errors.Is(err, errs.ErrUnavailable) {
		t.Errorf("provider down: %v, want a plain (retried) error", err)
	}
}

// TestCheckPageEmbeddings: the queued count is recorded on the page and returned with the wait's
// bound; a deleted segment is permanent.
func TestCheckPageEmbeddings(t *testing.T) {
	ctx := context.Background()
	seg := int64(12)
	in := CheckPageEmbeddingsInput{TenantID: 1, PageID: 2, ProductSegmentID: &seg}
	store := &fakeStore{}
	b := search.Backlog{Products: 10, Embedded: 6, Queued: 3, Refused: 1}
	res, err := NewPages(store, &fakeSearch{backlog: b}, nil, WithEmbeddingWait(time.Minute)).CheckPageEmbeddings(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	want := CheckPageEmbeddingsResult{Products: 10, Embedded: 6, Pending: 3, Refused: 1, MaxWait: time.Minute}
	if res != want || len(store.pending) != 1 || store.pending[0] != 3 {
		t.Errorf("result %+v, recorded %v; want %+v and 3 recorded", res, store.pending, want)
	}
	res, err = NewPages(&fakeStore{}, &fakeSearch{}, nil).CheckPageEmbeddings(ctx, in)
	if err != nil || res.MaxWait != DefaultEmbeddingWait {
		t.Errorf("default bound: %+v %v", res, err)
	}
	gone := &fakeSearch{backlogErr: fmt.Errorf("product segment 12: %w", errs.ErrNotFound)}
	_, err = NewPages(&fakeStore{}, gone, nil).CheckPageEmbeddings(ctx, in)
	wantAppErr(t, err, ErrTypeProductSegmentGone, true)
	_, err = NewPages(&fakeStore{err: errs.ErrNotFound}, &fakeSearch{}, nil).CheckPageEmbeddings(ctx, in)
	wantAppErr(t, err, ErrTypePageGone, true)
}

func TestCopyError(t *testing.T) {
	limited := &ai.ProviderError{Provider: "openai", Op: "chat", Kind: ai.ErrRateLimited, StatusCode: 429, RetryAfter: 7 * time.Second}
	app := wantAppErr(t, copyError(fmt.Errorf("page copy: %w", limited)), ErrTypePageAIRateLimited, false)
	if app.NextRetryDelay() != 7*time.Second {
		t.Errorf("next retry after %s, want the provider's 7s", app.NextRetryDelay())
	}
	wantAppErr(t, copyError(fmt.Errorf("%w in 3 attempts", pagegen.ErrInvalidOutput)), ErrTypeInvalidLLMOutput, true)
	wantAppErr(t, copyError(&ai.ProviderError{Provider: "openai", Op: "chat", Kind: ai.ErrInvalidRequest, StatusCode: 400}), ErrTypePageCopyRejected, true)
	for _, cause := range []error{
		&ai.ProviderError{Provider: "openai", Op: "chat", Kind: ai.ErrRateLimited, StatusCode: 429},
		&ai.ProviderError{Provider: "openai", Op: "chat", Kind: ai.ErrUnavailable, StatusCode: 502},
		&ai.ProviderError{Provider: "openai", Op: "chat", Kind: ai.ErrUnauthorized, StatusCode: 401},
	} {
		if got := copyError(cause); got != cause {
			t.Errorf("%v became %v, want it returned as is (retried)", cause, got)
		}
	}
}

func TestGeneratePageCopyLocal(t *testing.T) {
	local, err := ai.NewLocal(ai.Config{})
	if err != nil {
		t.Fatal(err)
	}
	a := NewPages(&fakeStore{}, &fakeSearch{}, local)
	out, err := a.GeneratePageCopy(context.Background(), GeneratePageCopyInput{TenantID: 1, PageID: 2, Query: "linen", Title: "Linen",
		Products: []pagegen.Product{{SKU: "A", Name: "Linen dress"}}})
	if err != nil || len(out.Blocks) == 0 || out.IntroCopy == "" {
		t.Fatalf("copy %+v, error %v", out, err)
	}
	_, err = a.GeneratePageCopy(context.Background(), GeneratePageCopyInput{TenantID: 1, PageID: 2, Query: "linen"})
	wantAppErr(t, err, ErrTypePageCopyRejected, true)
}

func TestPageStoreErrors(t *testing.T) {
	ctx := context.Background()
	gone := &fakeStore{err: fmt.Errorf("page 2: %w", errs.ErrNotFound)}
	a := NewPages(gone, &fakeSearch{}, nil)
	_, err := a.LoadPageQuery(ctx, LoadPageQueryInput{TenantID: 1, PageID: 2})
	wantAppErr(t, err, ErrTypePageGone, true)
	wantAppErr(t, a.SavePageCopy(ctx, SavePageCopyInput{TenantID: 1, PageID: 2}), ErrTypePageGone, true)
	if err := a.FailPageGeneration(ctx, FailPageGenerationInput{TenantID: 1, PageID: 2, Message: "x"}); err != nil {
		t.Errorf("recording the failure of a deleted page: %v", err)
	}
	wantAppErr(t, a.StartBulkJob(ctx, BulkJobRef{TenantID: 1, JobID: 3}), ErrTypeBulkJobGone, true)

	queryGone := NewPages(&fakeStore{err: errs.Coded(errs.ErrConflict, "query_deleted", "page 2 has no AIQuery any more")}, &fakeSearch{}, nil)
	_, err = queryGone.LoadPageQuery(ctx, LoadPageQueryInput{TenantID: 1, PageID: 2})
	wantAppErr(t, err, ErrTypePageQueryGone, true)

	refused := NewPages(&fakeStore{err: &errs.ValidationError{Fields: map[string]string{"blocks[0].type": "must be one of ..."}}}, &fakeSearch{}, nil)
	wantAppErr(t, refused.SavePageCopy(ctx, SavePageCopyInput{TenantID: 1, PageID: 2}), ErrTypePageContentInvalid, true)

	down := NewPages(&fakeStore{err: errors.New("connection refused")}, &fakeSearch{}, nil)
	var app *temporal.ApplicationError
	if err := down.SavePageCopy(ctx, SavePageCopyInput{TenantID: 1, PageID: 2}); err == nil || errors.As(err, &app) {
		t.Errorf("database down: %v, want a plain (retried) error", err)
	}
}

func TestListBulkPages(t *testing.T) {
	id := func(n int64) *int64 { return &n }
	store := &listStore{pages: []page.BulkJobPage{
		{PageID: id(1), Status: page.JobPagePending},
		{PageID: nil, Status: page.JobPageError},
		{PageID: id(3), Status: page.JobPageReady},
		{PageID: id(4), Status: page.JobPagePending},
		{PageID: id(5), Status: page.JobPagePending},
	}}
	a := NewPages(store, &fakeSearch{}, nil)
	res, err := a.ListBulkPages(context.Background(), ListBulkPagesInput{TenantID: 1, JobID: 2, Limit: 2})
	if err != nil || fmt.Sprint(res.PageIDs) != "[1 4]" || !res.More {
		t.Errorf("limited: %+v, %v", res, err)
	}
	res, err = a.ListBulkPages(context.Background(), ListBulkPagesInput{TenantID: 1, JobID: 2})
	if err != nil || fmt.Sprint(res.PageIDs) != "[1 4 5]" || res.More {
		t.Errorf("all: %+v, %v", res, err)
	}
}

type listStore struct {
	fakeStore
	pages []page.BulkJobPage
}

func (l *listStore) BulkPages(context.Context, int64, int64) ([]page.BulkJobPage, error) {
	return l.pages, nil
}
