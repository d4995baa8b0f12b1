package feed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/store"
	"github.com/cohort-dev/cohort/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// recordingStarter records sync starts; err makes them fail.
type recordingStarter struct {
	mu     sync.Mutex
	starts [][2]int64
	err    error
}

func (r *recordingStarter) StartFeedSync(_ context.Context, tenantID, feedID int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	r.starts = append(r.starts, [2]int64{tenantID, feedID})
	return nil
}

type env struct {
	t       *testing.T
	ctx     context.Context
	db      *store.DB
	cat     *catalog.Service
	starter *recordingStarter
	svc     *Service // may fetch from loopback
	clock   *testenv.Clock
	srv     *httptest.Server
	a, b    int64
}

// testSchema is the product schema of tenants a and b.
var testSchema = catalog.Schema{Fields: []catalog.Field{
	{Name: "description", Type: catalog.TypeText, Searchable: true},
	{Name: "price", Type: catalog.TypePrice},
	{Name: "sale_price", Type: catalog.TypePrice},
	{Name: "shipping_price", Type: catalog.TypeNumber},
	{Name: "availability", Type: catalog.TypeString, Facet: true},
	{Name: "brand", Type: catalog.TypeString, Facet: true, Searchable: true},
	{Name: "image_link", Type: catalog.TypeImage},
	{Name: "link", Type: catalog.TypeURL},
	{Name: "additional_images", Type: catalog.TypeArray},
	{Name: "gtin", Type: catalog.TypeString},
	{Name: "category", Type: catalog.TypeString},
	{Name: "tags", Type: catalog.TypeArray, Facet: true},
	{Name: "rating", Type: catalog.TypeNumber},
	{Name: "stock", Type: catalog.TypeInteger},
	{Name: "in_stock", Type: catalog.TypeBoolean},
	{Name: "released", Type: catalog.TypeDate},
}}

func newEnv(t *testing.T) *env {
	t.Helper()
	db := testenv.OpenDB(t)
	e := &env{t: t, ctx: context.Background(), db: db, starter: &recordingStarter{},
		clock: testenv.NewClock(time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC))}
	e.cat = catalog.NewService(db.Pool, e.clock.Now)
	e.svc = NewService(db.Pool, e.cat, e.starter, e.clock.Now, Options{AllowPrivate: true})
	e.a = testenv.Tenant(t, db, "feeds-a")
	e.b = testenv.Tenant(t, db, "feeds-b")
	for _, id := range []int64{e.a, e.b} {
		if _, err := e.cat.PutSchema(e.ctx, id, testSchema); err != nil {
			t.Fatal(err)
		}
	}
	e.srv = httptest.NewServer(http.FileServer(http.Dir("testdata")))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *env) url(name string) string { return e.srv.URL + "/" + name }

func (e *env) create(tenantID int64, in Input) *Feed {
	e.t.Helper()
	f, err := e.svc.Create(e.ctx, tenantID, in)
	if err != nil {
		e.t.Fatalf("create feed: %v", err)
	}
	return f
}

func (e *env) sync(tenantID, id int64) *SyncResult {
	e.t.Helper()
	res, err := e.svc.Sync(e.ctx, tenantID, id, nil)
	if err != nil {
		e.t.Fatalf("sync: %v", err)
	}
	return res
}

// product reads a product by SKU as stored.
func (e *env) product(tenantID int64, sku string) (name string, data map[string]any) {
	e.t.Helper()
	var raw []byte
	if err := e.db.Pool.QueryRow(e.ctx, `SELECT name, data FROM products WHERE tenant_id = $1 AND sku = $2`, tenantID, sku).Scan(&name, &raw); err != nil {
		e.t.Fatalf("product %s: %v", sku, err)
	}
	if err := json.Unmarshal(raw, &data); err != nil {
		e.t.Fatal(err)
	}
	return name, data
}

func (e *env) products(tenantID int64) int64 {
	return testenv.Count(e.t, e.db, `SELECT count(*) FROM products WHERE tenant_id = $1`, tenantID)
}

func wantValues(t *testing.T, sku string, data map[string]any, want map[string]any) {
	t.Helper()
	for k, w := range want {
		got, _ := json.Marshal(data[k])
		exp, _ := json.Marshal(w)
		if string(got) != string(exp) {
			t.Errorf("%s.%s = %s, want %s", sku, k, got, exp)
		}
	}
}

var merchantMap = map[string]string{
	"g:id": "sku", "g:title": "name", "g:description": "description", "g:price": "price", "g:sale_price": "sale_price",
	"g:shipping.g:price": "shipping_price", "g:availability": "availability", "g:brand": "brand",
	"g:image_link": "image_link", "g:link": "link", "g:additional_image_link": "additional_images", "g:gtin": "gtin",
	"g:google_product_category": "category",
}

func TestSyncGoogleMerchantRSS(t *testing.T) {
	e := newEnv(t)
	f := e.create(e.a, Input{Name: "Nordhaven", URL: e.url("merchant_rss.xml"), Format: "XML", FieldMap: merchantMap})
	if f.Format != FormatXML || f.Status != StatusIdle || f.LastSyncedAt != nil {
		t.Fatalf("created %+v", f)
	}
	var seen []int
	res, err := e.svc.Sync(e.ctx, e.a, f.ID, func(p Progress) { seen = append(seen, p.Items) })
	if err != nil {
		t.Fatal(err)
	}
	if want := (Counts{Total: 3, Created: 3}); res.Counts != want || len(res.FailedItems) != 0 {
		t.Fatalf("counts %+v %v, want %+v", res.Counts, res.FailedItems, want)
	}
	if len(seen) == 0 || seen[len(seen)-1] != 3 {
		t.Errorf("progress %v", seen)
	}
	name, data := e.product(e.a, "NH-JKT-0142")
	if name != "Fjell Insulated Parka - Forest Green" {
		t.Errorf("name %q", name)
	}
	wantValues(t, "NH-JKT-0142", data, map[string]any{
		"price": 249.0, "sale_price": 199.0, "shipping_price": 7.95, "availability": "in stock", "brand": "Nordhaven",
		"image_link": "https://cdn.nordhaven.example/images/fjell-parka-green.jpg",
		"link":       "https://www.nordhaven.example/products/fjell-parka?variant=forest-green",
		"additional_images": []string{"https://cdn.nordhaven.example/images/fjell-parka-green-back.jpg",
			"https://cdn.nordhaven.example/images/fjell-parka-green-detail.jpg"},
		"gtin":        "0840123456789",
		"category":    "Apparel & Accessories > Clothing > Outerwear > Coats & Jackets",
		"description": "Water-resistant parka with recycled down fill, a two-way zip and an adjustable hood.\nMachine washable at 30°C.",
	})
	name, data = e.product(e.a, "NH-BOOT-0077")
	if name != "Kjerag Trail Boot — Men's, Waterproof" {
		t.Errorf("CDATA name %q", name)
	}
	wantValues(t, "NH-BOOT-0077", data, map[string]any{"price": 1189.5, "availability": "out of stock",
		"description": "<p>Full-grain leather hiking boot with a Vibram&reg; sole.</p>"})
	if _, ok := data["sale_price"]; ok {
		t.Error("an absent element became a value")
	}
	// Embeddings are queued as for any save through the catalogue.
	if n := testenv.Count(t, e.db, `SELECT count(*) FROM product_embedding_queue WHERE tenant_id = $1`, e.a); n != 3 {
		t.Errorf("%d embeddings queued, want 3", n)
	}
	got, err := e.svc.Get(e.ctx, e.a, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != StatusSynced || got.LastSyncedAt == nil || !got.LastSyncedAt.Equal(e.clock.Now()) || got.Counts.Created != 3 || got.LastError != nil {
		t.Errorf("after sync %+v", got)
	}
	// A second sync of the same document changes nothing.
	e.clock.Advance(time.Hour)
	if res := e.sync(e.a, f.ID); res.Counts != (Counts{Total: 3, Unchanged: 3}) {
		t.Errorf("second sync %+v", res.Counts)
	}
	if got, _ := e.svc.Get(e.ctx, e.a, f.ID); !got.LastSyncedAt.Equal(e.clock.Now()) || got.Counts.Unchanged != 3 {
		t.Errorf("after second sync %+v", got)
	}
}

func TestSyncAtomWithGoogleNamespace(t *testing.T) {
	e := newEnv(t)
	// The document declares Google's namespace as "google:"; the map names it g: all the same.
	f := e.create(e.a, Input{Name: "Lumen", URL: e.url("merchant_atom.xml"), Format: "xml", FieldMap: map[string]string{
		"g:id": "sku", "title": "name", "summary": "description", "link": "link", "g:price": "price",
		"g:availability": "availability", "g:image_link": "image_link", "g:brand": "brand", "g:product_type": "category",
	}})
	if res := e.sync(e.a, f.ID); res.Counts != (Counts{Total: 2, Created: 2}) {
		t.Fatalf("counts %+v %v", res.Counts, res.FailedItems)
	}
	name, data := e.product(e.a, "LL-LAMP-210")
	if name != "Arc Floor Lamp, Brushed Brass" {
		t.Errorf("name %q", name)
	}
	wantValues(t, "LL-LAMP-210", data, map[string]any{"price": 289.0, "link": "https://shop.lumenloom.example/p/arc-floor-lamp",
		"brand": "Lumen & Loom", "category": "Lighting > Floor lamps", "image_link": "https://img.lumenloom.example/arc-floor-lamp.webp"})
	_, data = e.product(e.a, "LL-RUG-044")
	wantValues(t, "LL-RUG-044", data, map[string]any{"price": 640.0, "availability": "backorder"})
}

func TestSyncNestedJSON(t *testing.T) {
	e := newEnv(t)
	f := e.create(e.a, Input{Name: "Pantry", URL: e.url("nested.json"), Format: "json", FieldMap: map[string]string{
		"id": "sku", "title": "name", "body": "description", "vendor.name": "brand", "offers.price": "price",
		"offers.in_stock": "in_stock", "offers.stock": "stock", "images.0.src": "image_link", "tags": "tags",
		"rating.average": "rating", "released": "released",
	}})
	if res := e.sync(e.a, f.ID); res.Counts != (Counts{Total: 2, Created: 2}) {
		t.Fatalf("counts %+v %v", res.Counts, res.FailedItems)
	}
	name, data := e.product(e.a, "50123")
	if name != "AeroPress Go Travel Coffee Press" {
		t.Errorf("name %q", name)
	}
	wantValues(t, "50123", data, map[string]any{"brand": "AeroPress", "price": 39.95, "in_stock": true, "stock": 140,
		"image_link": "https://cdn.pixelpantry.example/aeropress-go.jpg", "tags": []string{"coffee", "travel", "gift"},
		"rating": 4.8, "released": "2019-09-15"})
	_, data = e.product(e.a, "50124")
	wantValues(t, "50124", data, map[string]any{"price": 169.0, "in_stock": false, "stock": 0, "tags": []string{"grinder", "coffee"},
		"released": "2015-03-01"})
}

func TestSyncReportsBrokenItemsAndImportsTheRest(t *testing.T) {
	e := newEnv(t)
	f := e.create(e.a, Input{Name: "Kestrel", URL: e.url("broken.xml"), Format: "xml", FieldMap: map[string]string{
		"g:id": "sku", "g:title": "name", "g:price": "price", "g:image_link": "image_link", "g:availability": "availability",
	}})
	res := e.sync(e.a, f.ID)
	if want := (Counts{Total: 6, Created: 2, Failed: 4}); res.Counts != want {
		t.Fatalf("counts %+v, want %+v (%v)", res.Counts, want, res.FailedItems)
	}
	got, err := e.svc.Get(e.ctx, e.a, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		pos    int
		sku    string
		reason string
	}{
		{2, "", "no sku: g:id is missing or empty"},
		{3, "KC-LIGHT-07", `g:price (price, price): "call us" is not a price`},
		{4, "KC-PUMP-02", "g:image_link (image_link, image)"},
		{5, "KC-NEW-99", "name"},
	}
	if len(got.FailedItems) != len(want) {
		t.Fatalf("failed items %+v", got.FailedItems)
	}
	for i, w := range want {
		fi := got.FailedItems[i]
		if fi.Position != w.pos || fi.SKU != w.sku || !strings.Contains(fi.Reason, w.reason) {
			t.Errorf("failed item %d = %+v, want position %d, sku %q, reason containing %q", i, fi, w.pos, w.sku, w.reason)
		}
	}
	if e.products(e.a) != 2 {
		t.Errorf("%d products, want KC-HELMET-01 and KC-TUBE-700", e.products(e.a))
	}
	e.product(e.a, "KC-TUBE-700")
}

func TestLoopbackFeedRefusedUnlessPrivateNetworksAllowed(t *testing.T) {
	e := newEnv(t)
	strict := NewService(e.db.Pool, e.cat, e.starter, e.clock.Now, Options{})
	// "localhost" resolves to loopback: the refusal names the host given, never the address.
	u := strings.Replace(e.url("merchant_rss.xml"), "127.0.0.1", "localhost", 1)
	f, err := strict.Create(e.ctx, e.a, Input{Name: "Local", URL: u, Format: "xml", FieldMap: merchantMap})
	if err != nil {
		t.Fatal(err)
	}
	_, err = strict.Sync(e.ctx, e.a, f.ID, nil)
	var se *SyncError
	if !errors.As(err, &se) || !se.Permanent {
		t.Fatalf("sync of a loopback feed: %v, want a permanent SyncError", err)
	}
	if !strings.Contains(se.Msg, "localhost") || strings.Contains(se.Msg, "127.0.0.1") || strings.Contains(se.Msg, "::1") {
		t.Errorf("message %q", se.Msg)
	}
	if e.products(e.a) != 0 {
		t.Error("a refused feed touched products")
	}
	if err := strict.MarkFailed(e.ctx, e.a, f.ID, se.Msg); err != nil {
		t.Fatal(err)
	}
	got, _ := strict.Get(e.ctx, e.a, f.ID)
	if got.Status != StatusError || got.LastError == nil || *got.LastError != se.Msg || got.LastSyncedAt != nil {
		t.Errorf("after refusal %+v", got)
	}
	// The same feed is fetched when private networks are allowed (COHORT_ALLOW_PRIVATE_NETWORKS).
	if res := e.sync(e.a, f.ID); res.Created != 3 {
		t.Errorf("allowed: %+v", res.Counts)
	}
	if got, _ := e.svc.Get(e.ctx, e.a, f.ID); got.Status != StatusSynced || got.LastError != nil {
		t.Errorf("after allowed sync %+v", got)
	}
}

// TestRedirectToRefusedAddressNamesTheHop: the feed's own host is allowed (private networks are,
// as in every test here) and redirects to the cloud metadata address, refused even then. The
// message says a redirect target is refused, not the feed's host, and names no address.
func TestRedirectToRefusedAddressNamesTheHop(t *testing.T) {
	e := newEnv(t)
	redirector := httptest.NewServer(http.RedirectHandler("http://169.254.169.254/latest/meta-data/feed.xml", http.StatusFound))
	t.Cleanup(redirector.Close)
	f := e.create(e.a, Input{Name: "Moved", URL: redirector.URL + "/feed.xml", Format: "xml", FieldMap: merchantMap})
	_, err := e.svc.Sync(e.ctx, e.a, f.ID, nil)
	var se *SyncError
	if !errors.As(err, &se) || !se.Permanent {
		t.Fatalf("sync of a feed redirecting to a refused address: %v, want a permanent SyncError", err)
	}
	if !strings.Contains(se.Msg, "a redirect target") {
		t.Errorf("message %q does not name the refused hop as a redirect target", se.Msg)
	}
	host := strings.TrimPrefix(redirector.URL, "http://")
	for _, leak := range []string{"169.254", "meta-data", host, "127.0.0.1", "feed's host"} {
		if strings.Contains(se.Msg, leak) {
			t.Errorf("message %q contains %q", se.Msg, leak)
		}
	}
	if e.products(e.a) != 0 {
		t.Error("a refused feed touched products")
	}
}

func TestFailedFetchLeavesProductsAlone(t *testing.T) {
	e := newEnv(t)
	f := e.create(e.a, Input{Name: "Nordhaven", URL: e.url("merchant_rss.xml"), Format: "xml", FieldMap: merchantMap})
	e.sync(e.a, f.ID)
	var before string
	_ = e.db.Pool.QueryRow(e.ctx, `SELECT string_agg(sku || data::text || updated_at::text, ',' ORDER BY sku) FROM products WHERE tenant_id = $1`, e.a).Scan(&before)
	cases := []struct {
		name, url string
		permanent bool
		msg       string
	}{
		{"not found", e.url("gone.xml"), true, "answered HTTP 404"},
		{"server error", "", false, "answered HTTP 503"},
	}
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	defer down.Close()
	cases[1].url = down.URL + "/feed.xml"
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := e.svc.Update(e.ctx, e.a, f.ID, Patch{URL: &c.url}); err != nil {
				t.Fatal(err)
			}
			_, err := e.svc.Sync(e.ctx, e.a, f.ID, nil)
			var se *SyncError
			if !errors.As(err, &se) || se.Permanent != c.permanent || !strings.Contains(se.Msg, c.msg) {
				t.Fatalf("sync: %v (%+v)", err, se)
			}
		})
	}
	var after string
	_ = e.db.Pool.QueryRow(e.ctx, `SELECT string_agg(sku || data::text || updated_at::text, ',' ORDER BY sku) FROM products WHERE tenant_id = $1`, e.a).Scan(&after)
	if before != after || before == "" {
		t.Error("a failed fetch changed products")
	}
	if got, _ := e.svc.Get(e.ctx, e.a, f.ID); got.Counts.Created != 3 {
		t.Errorf("a failed fetch replaced the last sync's counts: %+v", got.Counts)
	}
}

func TestSyncOfMalformedDocumentKeepsItemsBeforeTheFault(t *testing.T) {
	e := newEnv(t)
	docs := map[string]string{
		"/cut.json":  `{"items": [{"sku": "A-1", "name": "First"}, {"sku": "A-2", "name": "Second"}, {"sku": "A-3", "na`,
		"/bad.xml":   `<rss><channel><item><id>B-1</id><title>One</title></item><item><id>B-2</id><title>Two</tit></item></channel></rss>`,
		"/big.json":  `[` + strings.Repeat(`{"sku":"C","name":"C"},`, 100) + `{}]`,
		"/none.json": `{"count": 2, "skus": ["a", "b"]}`,
		"/page.xml":  `<html><body><p>Our shop</p></body></html>`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, docs[r.URL.Path]) }))
	defer srv.Close()
	small := NewService(e.db.Pool, e.cat, e.starter, e.clock.Now, Options{AllowPrivate: true, MaxBytes: 1000, ChunkItems: 1})
	cases := []struct {
		path, format string
		fieldMap     map[string]string
		msg          string
		stored       int64
	}{
		{"/cut.json", "json", nil, "the JSON document ends early", 2},
		{"/bad.xml", "xml", map[string]string{"id": "sku", "title": "name"}, "malformed XML at line 1", 1},
		{"/big.json", "json", nil, "larger than 1000 bytes", 1},
		{"/none.json", "json", nil, "no array of item objects", 0},
		{"/page.xml", "xml", nil, "not an RSS or Atom feed (its root element is <html>)", 0},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			tenant := testenv.Tenant(t, e.db, "malformed"+strings.NewReplacer("/", "-", ".", "-").Replace(c.path))
			f, err := small.Create(e.ctx, tenant, Input{Name: c.path, URL: srv.URL + c.path, Format: c.format, FieldMap: c.fieldMap})
			if err != nil {
				t.Fatal(err)
			}
			_, err = small.Sync(e.ctx, tenant, f.ID, nil)
			var se *SyncError
			if !errors.As(err, &se) || !se.Permanent || !strings.Contains(se.Msg, c.msg) {
				t.Fatalf("sync: %v, want a permanent error saying %q", err, c.msg)
			}
			if n := e.products(tenant); n != c.stored {
				t.Errorf("%d products stored, want %d", n, c.stored)
			}
			got, _ := small.Get(e.ctx, tenant, f.ID)
			if c.stored > 0 && (got.Status != StatusError || got.LastError == nil || *got.LastError != se.Msg || got.Counts.Created != int(c.stored) || got.LastSyncedAt != nil) {
				t.Errorf("feed after the fault %+v", got)
			}
		})
	}
}

func TestCreateAndUpdateValidation(t *testing.T) {
	e := newEnv(t)
	valid := func() Input {
		return Input{Name: "Feed", URL: "https://feeds.example.com/google.xml", Format: "xml", FieldMap: map[string]string{"g:id": "sku", "g:price": "price"}}
	}
	cases := []struct {
		name  string
		edit  func(*Input)
		field string
	}{
		{"blank name", func(in *Input) { in.Name = "  " }, "name"},
		{"name with a line break", func(in *Input) { in.Name = "a\nb" }, "name"},
		{"no url", func(in *Input) { in.URL = "" }, "url"},
		{"ftp url", func(in *Input) { in.URL = "ftp://feeds.example.com/f.xml" }, "url"},
		{"relative url", func(in *Input) { in.URL = "/feeds/google.xml" }, "url"},
		{"url with credentials", func(in *Input) { in.URL = "https://user:pw@feeds.example.com/f.xml" }, "url"},
		{"no format", func(in *Input) { in.Format = "" }, "format"},
		{"csv format", func(in *Input) { in.Format = "csv" }, "format"},
		{"nothing to sku", func(in *Input) { in.FieldMap = map[string]string{"g:title": "name"} }, "field_map"},
		{"empty map", func(in *Input) { in.FieldMap = map[string]string{} }, "field_map"},
		{"unknown target", func(in *Input) { in.FieldMap["g:color"] = "colour" }, "field_map.g:color"},
		{"two sources to sku", func(in *Input) { in.FieldMap["id"] = "sku" }, "field_map.id"},
		{"source with a space", func(in *Input) { in.FieldMap["g:sale price"] = "sale_price" }, "field_map"},
		{"empty path segment", func(in *Input) { in.FieldMap["offers..price"] = "sale_price" }, "field_map"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := valid()
			c.edit(&in)
			_, err := e.svc.Create(e.ctx, e.a, in)
			var ve *errs.ValidationError
			if !errors.As(err, &ve) || ve.Fields[c.field] == "" {
				t.Fatalf("create: %v, want a validation error on %s", err, c.field)
			}
		})
	}
	// Defaults: the format's usual identifier and title.
	f := e.create(e.a, Input{Name: " Google ", URL: "https://feeds.example.com/google.xml", Format: "xml"})
	if f.Name != "Google" || f.FieldMap["g:id"] != "sku" || f.FieldMap["g:title"] != "name" || len(f.FieldMap) != 2 {
		t.Errorf("defaults %+v", f)
	}
	j := e.create(e.a, Input{Name: "JSON", URL: "http://feeds.example.com/p.json", Format: "json"})
	if j.FieldMap["sku"] != "sku" || j.FieldMap["name"] != "name" {
		t.Errorf("json defaults %+v", j.FieldMap)
	}
	// PATCH changes only what it names and validates it.
	name := "Renamed"
	got, err := e.svc.Update(e.ctx, e.a, f.ID, Patch{Name: &name})
	if err != nil || got.Name != "Renamed" || got.URL != f.URL || got.FieldMap["g:id"] != "sku" {
		t.Fatalf("patch name: %+v %v", got, err)
	}
	bad := map[string]string{"g:title": "name"}
	if _, err := e.svc.Update(e.ctx, e.a, f.ID, Patch{FieldMap: &bad}); !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("patch without sku: %v", err)
	}
	fm := map[string]string{"g:id": "sku", "g:price": "price", "g:brand": "brand"}
	if got, err := e.svc.Update(e.ctx, e.a, f.ID, Patch{FieldMap: &fm}); err != nil || len(got.FieldMap) != 3 {
		t.Errorf("patch field_map: %+v %v", got, err)
	}
	// A field removed from the schema afterwards fails the sync before any product is touched.
	if _, err := e.cat.PutSchema(e.ctx, e.a, catalog.Schema{Fields: []catalog.Field{{Name: "price", Type: catalog.TypePrice}}}); err != nil {
		t.Fatal(err)
	}
	u := e.url("merchant_rss.xml")
	if _, err := e.svc.Update(e.ctx, e.a, f.ID, Patch{URL: &u}); err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.Sync(e.ctx, e.a, f.ID, nil)
	var se *SyncError
	if !errors.As(err, &se) || !se.Permanent || !strings.Contains(se.Msg, "field_map.g:brand") || e.products(e.a) != 0 {
		t.Errorf("sync with a stale field_map: %v", err)
	}
}

func TestTenantIsolation(t *testing.T) {
	e := newEnv(t)
	f := e.create(e.a, Input{Name: "A's feed", URL: e.url("merchant_rss.xml"), Format: "xml", FieldMap: merchantMap})
	name := "stolen"
	checks := map[string]error{}
	_, checks["get"] = e.svc.Get(e.ctx, e.b, f.ID)
	_, checks["update"] = e.svc.Update(e.ctx, e.b, f.ID, Patch{Name: &name})
	_, checks["sync"] = e.svc.RequestSync(e.ctx, e.b, f.ID)
	checks["delete"] = e.svc.Delete(e.ctx, e.b, f.ID)
	for op, err := range checks {
		if !errors.Is(err, errs.ErrNotFound) {
			t.Errorf("%s of another tenant's feed: %v, want not found", op, err)
		}
	}
	if list, _ := e.svc.List(e.ctx, e.b); len(list) != 0 {
		t.Errorf("tenant b lists %d feeds", len(list))
	}
	if _, err := e.svc.Sync(e.ctx, e.b, f.ID, nil); !errors.Is(err, ErrGone) {
		t.Errorf("sync under another tenant: %v", err)
	}
	if got, _ := e.svc.Get(e.ctx, e.a, f.ID); got.Name != "A's feed" || got.Status != StatusIdle {
		t.Errorf("a's feed changed: %+v", got)
	}
	if len(e.starter.starts) != 0 {
		t.Errorf("starts %v", e.starter.starts)
	}
}

func TestRequestSync(t *testing.T) {
	e := newEnv(t)
	f := e.create(e.a, Input{Name: "Feed", URL: e.url("merchant_rss.xml"), Format: "xml", FieldMap: merchantMap})
	got, err := e.svc.RequestSync(e.ctx, e.a, f.ID)
	if err != nil || got.Status != StatusQueued {
		t.Fatalf("request: %+v %v", got, err)
	}
	if len(e.starter.starts) != 1 || e.starter.starts[0] != [2]int64{e.a, f.ID} {
		t.Errorf("starts %v", e.starter.starts)
	}
	// A request while the sync runs leaves it running (the workflow runs once more).
	testenv.Exec(t, e.db, `UPDATE product_feeds SET status = 'syncing' WHERE id = $1`, f.ID)
	if got, err := e.svc.RequestSync(e.ctx, e.a, f.ID); err != nil || got.Status != StatusSyncing {
		t.Errorf("request while syncing: %+v %v", got, err)
	}
	// A start that fails puts the status back.
	testenv.Exec(t, e.db, `UPDATE product_feeds SET status = 'synced' WHERE id = $1`, f.ID)
	e.starter.err = fmt.Errorf("start feed sync: %w", errs.ErrUnavailable)
	if _, err := e.svc.RequestSync(e.ctx, e.a, f.ID); !errors.Is(err, errs.ErrUnavailable) {
		t.Errorf("failed start: %v", err)
	}
	if got, _ := e.svc.Get(e.ctx, e.a, f.ID); got.Status != StatusSynced {
		t.Errorf("status after a failed start %q", got.Status)
	}
	if _, err := e.svc.RequestSync(e.ctx, e.a, 999999); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("unknown feed: %v", err)
	}
	// Deleting the feed mid-way: the sync reports it gone.
	if err := e.svc.Delete(e.ctx, e.a, f.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Sync(e.ctx, e.a, f.ID, nil); !errors.Is(err, ErrGone) {
		t.Errorf("sync of a deleted feed: %v", err)
	}
}

func TestJSONReaderFindsTheItemsArray(t *testing.T) {
	cases := []struct {
		name, doc string
		skus      []string
		errs      []string
	}{
		{"top-level array", `[{"sku":"a"},{"sku":"b"}]`, []string{"a", "b"}, nil},
		{"under a key after other arrays", `{"tags":["x","y"],"empty":[],"meta":{"a":[1]},"data":[{"sku":"c"},7,{"sku":"d"}]}`,
			[]string{"c", "", "d"}, []string{"", "the item is not a JSON object", ""}},
		{"only an empty list", `{"items":[]}`, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rd := newJSONReader(strings.NewReader(c.doc))
			var skus, problems []string
			for {
				it, err := rd.Next()
				if err != nil {
					if err.Error() != "EOF" {
						t.Fatal(err)
					}
					break
				}
				s, _ := it.fields["sku"].(string)
				skus = append(skus, s)
				problems = append(problems, it.err)
				if it.pos != len(skus) {
					t.Errorf("position %d, want %d", it.pos, len(skus))
				}
			}
			if fmt.Sprint(skus) != fmt.Sprint(c.skus) || (c.errs != nil && fmt.Sprint(problems) != fmt.Sprint(c.errs)) {
				t.Errorf("skus %q problems %q", skus, problems)
			}
		})
	}
}

func TestLookupPaths(t *testing.T) {
	item := map[string]any{
		"offers.price": "exact",
		"offers":       map[string]any{"price": "12.00", "list": []any{map[string]any{"sku": "first"}, map[string]any{"sku": "second"}}},
		"g:shipping":   []any{map[string]any{"g:price": "1 USD"}, map[string]any{"g:price": "2 USD"}},
	}
	for path, want := range map[string]any{
		"offers.price": "exact", "offers.list.1.sku": "second", "offers.list.sku": "first", "g:shipping.g:price": "1 USD",
		"g:shipping.1.g:price": "2 USD", "offers.list.9.sku": nil, "missing": nil,
	} {
		got, _ := lookup(item, path)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("lookup %q = %v, want %v", path, got, want)
		}
	}
}

func TestLatin1Feed(t *testing.T) {
	doc := append([]byte(`<?xml version="1.0" encoding="ISO-8859-1"?><rss><channel><item><title>Caf`), 0xe9, 0x20, 0x80)
	doc = append(doc, []byte(`</title></item></channel></rss>`)...)
	it, err := newXMLReader(strings.NewReader(string(doc))).Next()
	if err != nil {
		t.Fatal(err)
	}
	if it.fields["title"] != "Café €" {
		t.Errorf("title %q", it.fields["title"])
	}
}

// TestSyncStopsWhenTheFeedIsDeleted: a feed deleted during its sync stops it after the chunk under
// way, even while the document's server stalls (the blocked read is abandoned).
func TestSyncStopsWhenTheFeedIsDeleted(t *testing.T) {
	e := newEnv(t)
	release := make(chan struct{})
	stall := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `[{"sku":"S-1","name":"One"},{"sku":"S-2","name":"Two"},`)
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer stall.Close()
	defer close(release)
	svc := NewService(e.db.Pool, e.cat, e.starter, e.clock.Now, Options{AllowPrivate: true, ChunkItems: 1})
	f, err := svc.Create(e.ctx, e.a, Input{Name: "Stalling", URL: stall.URL, Format: "json"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := svc.Sync(e.ctx, e.a, f.ID, func(Progress) {
			if err := svc.Delete(e.ctx, e.a, f.ID); err != nil && !errors.Is(err, errs.ErrNotFound) {
				t.Error(err)
			}
		})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrGone) {
			t.Errorf("sync of a feed deleted midway: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the sync did not stop after its feed was deleted")
	}
	if n := e.products(e.a); n != 1 {
		t.Errorf("%d products, want the first chunk's one", n)
	}
}
