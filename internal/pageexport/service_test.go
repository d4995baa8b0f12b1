package pageexport

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/auth"
	"github.com/cohort-dev/cohort/internal/blob"
	"github.com/cohort-dev/cohort/internal/design"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/page"
	"github.com/cohort-dev/cohort/internal/store"
	"github.com/cohort-dev/cohort/internal/testenv"
)

type nopGenerator struct{}

func (nopGenerator) StartGeneration(context.Context, int64, int64) error { return nil }
func (nopGenerator) StartBulk(context.Context, int64, int64) error       { return nil }

type recordingStarter struct {
	started []int64
	err     error
}

func (r *recordingStarter) StartExport(_ context.Context, _, exportID int64) error {
	r.started = append(r.started, exportID)
	return r.err
}

type fixedDesign Tokens

func (d fixedDesign) Tokens(context.Context, int64) (Tokens, error) { return Tokens(d), nil }

type svcEnv struct {
	db      *store.DB
	pages   *page.Service
	blob    *blob.Local
	clock   *testenv.Clock
	starter *recordingStarter
	svc     *Service
	a, b    int64
}

func newSvcEnv(t *testing.T) *svcEnv {
	t.Helper()
	e := &svcEnv{db: testenv.OpenDB(t), clock: testenv.NewClock(time.Now()), starter: &recordingStarter{}}
	e.pages = page.NewService(e.db.Pool, nopGenerator{}, time.Now, nil, page.Options{})
	var err error
	e.blob, err = blob.NewLocal(blob.LocalConfig{Dir: filepath.Join(t.TempDir(), "blobs"), BaseURL: "http://cohort.test",
		SigningKey: bytes.Repeat([]byte("k"), 32), Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	e.a = testenv.Tenant(t, e.db, "tenant-a")
	e.b = testenv.Tenant(t, e.db, "tenant-b")
	e.svc = NewService(Deps{Pool: e.db.Pool, Pages: e.pages, Keys: NewKeys(e.db.Pool, e.clock.Now), Blob: e.blob,
		Design: fixedDesign{PrimaryColor: "#123456", SpacingUnit: 4}, Starter: e.starter, Now: e.clock.Now})
	return e
}

// page creates a page of the tenant with the blocks of fullContent and its two products.
func (e *svcEnv) page(t *testing.T, tenantID int64, slug string) *page.Page {
	t.Helper()
	ctx := context.Background()
	q, err := e.pages.CreateQuery(ctx, tenantID, page.QueryInput{Text: "linen dresses"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.pages.CreatePage(ctx, tenantID, page.CreateInput{Query: &q.ID, Slug: &slug})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Exec(t, e.db, `INSERT INTO products (tenant_id, sku, sku_key, name, name_key, data) VALUES ($1, 'SKU-1', 'sku-1', 'Linen dress', 'linen dress', '{"price": 49.5, "image_url": "https://img.example/1.png"}'),
		($1, 'sku-2', 'sku-2', 'Skirt', 'skirt', '{}') ON CONFLICT DO NOTHING`, tenantID)
	testenv.Exec(t, e.db, `INSERT INTO product_schemas (tenant_id, default_currency) VALUES ($1, 'EUR') ON CONFLICT DO NOTHING`, tenantID)
	c := fullContent("words", "https://img.example")
	if err := e.pages.SaveGenerated(ctx, tenantID, p.ID, page.GeneratedContent{IntroCopy: "Intro", ProductSKUs: []string{"SKU-1", "sku-2"}, Blocks: c.Page.Blocks}); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestServiceBuildsEveryFormat(t *testing.T) {
	e := newSvcEnv(t)
	ctx := context.Background()
	p := e.page(t, e.a, "linen")
	for _, f := range Formats() {
		st, err := e.svc.Start(ctx, e.a, p.ID, string(f), "https://api.cohort.test")
		if err != nil {
			t.Fatal(err)
		}
		if st.Status != StatusPending {
			t.Errorf("start status %q", st.Status)
		}
		got, err := e.svc.Get(ctx, e.a, p.ID, st.ExportID)
		if err != nil || got.Status != StatusQueued || got.Format != f {
			t.Fatalf("queued export %+v, %v", got, err)
		}
		built, err := e.svc.Build(ctx, e.a, st.ExportID)
		if err != nil {
			t.Fatalf("build %s: %v", f, err)
		}
		if built.Status != StatusReady || built.ExpiresAt == nil || built.ExpiresAt.Sub(*built.FinishedAt) != LinkTTL {
			t.Errorf("built %+v", built)
		}
		rc, err := e.blob.Open(ctx, built.BlobKey)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(rc)
		_ = rc.Close()
		switch f {
		case HTML, TSX:
			s := string(body)
			if !strings.Contains(s, "https://api.cohort.test/sdk/v1/cohort.min.js") || !strings.Contains(s, "pk_") ||
				!strings.Contains(s, "--cohort-primary:#123456") || !strings.Contains(s, "Linen dress") || !strings.Contains(s, "49.50 EUR") {
				t.Errorf("%s export misses the snippet, the tokens or the products:\n%.400s", f, s)
			}
		case JSON:
			if !strings.Contains(string(body), `"sku": "SKU-1"`) || !strings.Contains(string(body), `"primary_color": "#123456"`) {
				t.Errorf("json export: %.400s", body)
			}
		case Zip:
			if _, err := zip.NewReader(bytes.NewReader(body), int64(len(body))); err != nil {
				t.Errorf("zip export: %v", err)
			}
		}
		linked, err := e.svc.WithLink(ctx, built)
		if err != nil || !strings.HasPrefix(linked.DownloadURL, "http://cohort.test/api/blobs/"+built.BlobKey+"?expires=") {
			t.Errorf("link %q, %v", linked.DownloadURL, err)
		}
	}
	latest, err := e.svc.Get(ctx, e.a, p.ID, 0)
	if err != nil || latest.Format != Zip {
		t.Errorf("latest %+v, %v", latest, err)
	}
	// The tenant's export key is minted once, is a pk_ key in api_keys, and is reused.
	if n := testenv.Count(t, e.db, `SELECT count(*) FROM api_keys WHERE tenant_id = $1 AND kind = 'public'`, e.a); n != 1 {
		t.Errorf("%d public keys minted, want 1", n)
	}
	k1, err := e.svc.keys.PublicKey(ctx, e.a)
	if err != nil {
		t.Fatal(err)
	}
	if kind, id, ok := auth.ParseKey(k1); !ok || kind != auth.KeyPublic ||
		testenv.Count(t, e.db, `SELECT count(*) FROM api_keys WHERE key_id = $1 AND key_hash = $2`, id, auth.HashKey(k1)) != 1 {
		t.Errorf("export key %q is not a stored pk_ key", k1)
	}
	// Revoked (a key rotation): the next export gets a new key.
	testenv.Exec(t, e.db, `UPDATE api_keys SET revoked_at = now() WHERE tenant_id = $1`, e.a)
	k2, err := e.svc.keys.PublicKey(ctx, e.a)
	if err != nil || k2 == k1 {
		t.Errorf("after revocation: key %q (was %q), %v", k2, k1, err)
	}
}

func TestServiceIsolationAndFailures(t *testing.T) {
	e := newSvcEnv(t)
	ctx := context.Background()
	p := e.page(t, e.a, "linen")
	st, err := e.svc.Start(ctx, e.a, p.ID, "html", "https://api.cohort.test")
	if err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"start on another tenant's page": func() error { _, err := e.svc.Start(ctx, e.b, p.ID, "html", "x"); return err }(),
		"get another tenant's export":    func() error { _, err := e.svc.Get(ctx, e.b, p.ID, st.ExportID); return err }(),
		"latest of another tenant":       func() error { _, err := e.svc.Get(ctx, e.b, p.ID, 0); return err }(),
		"export of another page":         func() error { _, err := e.svc.Get(ctx, e.a, p.ID+1000, st.ExportID); return err }(),
	} {
		if !errors.Is(err, errs.ErrNotFound) {
			t.Errorf("%s: %v, want not found", name, err)
		}
	}
	if _, err := e.svc.Build(ctx, e.b, st.ExportID); !IsGone(err) {
		t.Errorf("build as another tenant: %v", err)
	}
	if _, err := e.svc.Start(ctx, e.a, p.ID, "pdf", "x"); !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("bad format: %v", err)
	}
	// A start that fails is recorded as failed and answers unavailable.
	e.starter.err = errors.New("temporal down")
	if _, err := e.svc.Start(ctx, e.a, p.ID, "json", "x"); !errors.Is(err, errs.ErrUnavailable) {
		t.Errorf("failed start: %v", err)
	}
	e.starter.err = nil
	latest, err := e.svc.Get(ctx, e.a, p.ID, 0)
	if err != nil || latest.Status != StatusError || latest.Error == nil {
		t.Errorf("failed start recorded as %+v, %v", latest, err)
	}
	// Fail records an error, but never over a ready export.
	if err := e.svc.Fail(ctx, e.a, st.ExportID, strings.Repeat("é", 3000)); err != nil {
		t.Fatal(err)
	}
	got, _ := e.svc.Get(ctx, e.a, p.ID, st.ExportID)
	if got.Status != StatusError || len(*got.Error) > maxErrorLength {
		t.Errorf("failed export %+v", got)
	}
	st2, _ := e.svc.Start(ctx, e.a, p.ID, "tsx", "x")
	if _, err := e.svc.Build(ctx, e.a, st2.ExportID); err != nil {
		t.Fatal(err)
	}
	_ = e.svc.Fail(ctx, e.a, st2.ExportID, "late failure")
	if got, _ := e.svc.Get(ctx, e.a, p.ID, st2.ExportID); got.Status != StatusReady {
		t.Errorf("a ready export was marked failed: %+v", got)
	}
	// Past 24 hours a ready export hands out no link.
	e.clock.Advance(LinkTTL + time.Second)
	got, _ = e.svc.Get(ctx, e.a, p.ID, st2.ExportID)
	if linked, err := e.svc.WithLink(ctx, got); err != nil || linked.DownloadURL != "" {
		t.Errorf("expired export link %q, %v", linked.DownloadURL, err)
	}
	// A deleted page deletes its exports; a build of one is gone.
	if err := e.pages.DeletePage(ctx, e.a, p.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Build(ctx, e.a, st.ExportID); !IsGone(err) {
		t.Errorf("build after the page was deleted: %v", err)
	}
}

// TestUnicodeFontFromDesignSystem: a font family outside ASCII that the design system accepts
// (what PUT design-system stores) is what the HTML and TSX exports are styled with, quoted, not
// silently replaced by the default.
func TestUnicodeFontFromDesignSystem(t *testing.T) {
	e := newSvcEnv(t)
	ctx := context.Background()
	store := design.NewStore(e.db.Pool, time.Now)
	if _, err := store.Update(ctx, e.a, design.Patch{HeadingFont: new("Ωmega"), BodyFont: new("Ünïcode  Sans")}); err != nil {
		t.Fatal(err)
	}
	svc := NewService(Deps{Pool: e.db.Pool, Pages: e.pages, Keys: NewKeys(e.db.Pool, e.clock.Now), Blob: e.blob,
		Design: DesignStore{Store: store}, Starter: e.starter, Now: e.clock.Now})
	p := e.page(t, e.a, "fonts")
	for _, f := range []Format{HTML, TSX} {
		st, err := svc.Start(ctx, e.a, p.ID, string(f), "https://api.cohort.test")
		if err != nil {
			t.Fatal(err)
		}
		built, err := svc.Build(ctx, e.a, st.ExportID)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := e.blob.Open(ctx, built.BlobKey)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(rc)
		_ = rc.Close()
		quote := `"`
		if f == TSX {
			quote = `\"` // inside the TSX file's string literal
		}
		for _, want := range []string{"--cohort-heading-font:" + quote + "Ωmega" + quote, "--cohort-body-font:" + quote + "Ünïcode Sans" + quote} {
			if !strings.Contains(string(body), want) {
				t.Errorf("%s export lacks %s", f, want)
			}
		}
	}
}
