package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/catalog/prodseg"
	"github.com/cohort-dev/cohort/internal/segment"
)

// fuzzStarter starts nothing: the fuzz target is about bodies, and a compute request that a
// PATCH makes only has to succeed.
type fuzzStarter struct{}

func (fuzzStarter) Compute(_ context.Context, tenantID, segmentID int64) (string, error) {
	return fmt.Sprintf("fuzz:%d:%d", tenantID, segmentID), nil
}

func (fuzzStarter) Recompute(ctx context.Context, tenantID, segmentID int64) (string, error) {
	return fuzzStarter{}.Compute(ctx, tenantID, segmentID)
}

func (fuzzStarter) Export(context.Context, int64, int64, int64) error { return nil }

func (fuzzStarter) Draft(context.Context, int64, int64) (*segment.Segment, error) {
	return nil, fmt.Errorf("fuzz: no drafts")
}

func (fuzzStarter) SetRefresh(context.Context, int64, int64, time.Duration) error { return nil }

func (fuzzStarter) StartCompute(ctx context.Context, tenantID, segmentID int64) (string, error) {
	return fuzzStarter{}.Compute(ctx, tenantID, segmentID)
}

// fuzzEndpoint is one JSON endpoint and the bodies its seed corpus starts from.
type fuzzEndpoint struct {
	method, path string
	header       http.Header
	seeds        []string
}

// FuzzAPIBodies sends fuzzed bodies to the JSON endpoints through the real router over real
// Postgres (catalogue, product segments, segments, the session handshake): never a 5xx, and every
// 4xx is the one error shape. Run it with
//
//	go test ./api -run '^$' -fuzz FuzzAPIBodies -fuzztime 30s
func FuzzAPIBodies(f *testing.F) {
	fx := newFixture(f)
	ctx := context.Background()
	cat := catalog.NewService(fx.db.Pool, time.Now)
	segs := segment.NewService(fx.db.Gorm, fx.db.Pool, time.Now, fuzzStarter{})
	h := fx.newServer(f, func(d *Deps) {
		d.Catalog = &CatalogDeps{Service: cat}
		d.ProductSegments = &ProductSegmentsDeps{Service: prodseg.NewService(fx.db.Pool, cat, fuzzStarter{}, time.Now)}
		d.Segments = &SegmentsDeps{Service: segs}
	}).Handler()

	call := func(method, path string, header http.Header, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		for k, v := range header {
			req.Header[k] = v
		}
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req.WithContext(ctx))
		return rec
	}
	mustCreate := func(path string, header http.Header, body string) int64 {
		rec := call(http.MethodPost, path, header, body)
		var out struct {
			ID int64 `json:"id"`
		}
		if rec.Code != http.StatusCreated || json.Unmarshal(rec.Body.Bytes(), &out) != nil || out.ID == 0 {
			f.Fatalf("setup POST %s: %d %s", path, rec.Code, rec.Body)
		}
		return out.ID
	}
	sk := xAPIKey(fx.A)
	bearerA := bearer(fx.A)
	const schema = `{"fields":[{"name":"color","type":"string","facet":true},{"name":"price","type":"price"},{"name":"tags","type":"array","searchable":true},{"name":"active","type":"boolean"}],"default_currency":"EUR","default_locale":"de-DE"}`
	if rec := call(http.MethodPut, "/api/pim/schema/", sk, schema); rec.Code != http.StatusOK {
		f.Fatalf("setup schema: %d %s", rec.Code, rec.Body)
	}
	const product = `{"sku":"RED-1","name":"Red shirt","data":{"color":"red","price":10,"tags":["x"],"active":true}}`
	productID := mustCreate("/api/pim/products/", sk, product)
	const prodDef = `{"conditions":[{"field":"color","operator":"eq","value":"red"}]}`
	prodSegID := mustCreate("/api/product-segments/", sk, `{"name":"Reds","definition":`+prodDef+`}`)
	const segDef = `{"conditions":[{"type":"frequency","event_type":"order_completed","operator":"gte","value":1}],"logic":"and"}`
	segID := mustCreate("/api/segments/", bearerA, fmt.Sprintf(`{"name":"Buyers","segment_type":"rule","tenant":%d}`, fx.A.T.ID))

	endpoints := []fuzzEndpoint{
		{http.MethodPost, "/api/auth/session/", hdr("Authorization", "ApiKey "+fx.A.PK),
			[]string{``, `{}`, `{"user_id":"u-1","anonymous_id":"anon-1"}`, `{"user_id":"u-1","user_id_sig":"00","user_id_ts":1700000000}`}},
		{http.MethodPut, "/api/pim/schema/", sk, []string{schema, `{"fields":[]}`, `{"fields":[{"name":"n","type":"number","unit":"kg","required":true}]}`}},
		{http.MethodPost, "/api/pim/products/", sk, []string{product, `{"sku":"A-2","name":"A","data":{}}`}},
		{http.MethodPatch, fmt.Sprintf("/api/pim/products/%d/", productID), sk, []string{`{"name":"Blue shirt"}`, `{"data":{"color":"blue","price":null}}`}},
		{http.MethodPost, "/api/pim/products/bulk/", sk, []string{`{"products":[{"sku":"B-1","name":"B","color":"red","price":3}]}`, `{"products":[]}`}},
		{http.MethodPost, "/api/product-segments/", sk, []string{`{"name":"Cheap","definition":{"conditions":[{"field":"price","operator":"lt","value":3}]}}`, `{"name":"Tagged","description":"d","definition":{"conditions":[{"field":"tags","operator":"contains","value":"x"}],"logic":"or"}}`}},
		{http.MethodPost, "/api/product-segments/preview/", sk, []string{prodDef, `{"definition":` + prodDef + `,"limit":5}`}},
		{http.MethodPatch, fmt.Sprintf("/api/product-segments/%d/", prodSegID), sk, []string{`{"name":"Reds 2"}`, `{"definition":` + prodDef + `}`}},
		{http.MethodPost, "/api/segments/", bearerA, []string{fmt.Sprintf(`{"name":"Active","segment_type":"rule","tenant":%d,"description":"d"}`, fx.A.T.ID),
			fmt.Sprintf(`{"name":"Alike","segment_type":"lookalike","tenant":%d}`, fx.A.T.ID)}},
		{http.MethodPost, "/api/segments/preview/", bearerA, []string{`{"definition":` + segDef + `,"limit":10}`, `{"definition":` + segDef + `}`}},
		{http.MethodPatch, fmt.Sprintf("/api/segments/%d/", segID), bearerA, []string{`{"definition":` + segDef + `}`, `{"name":"Buyers 2","refresh_every":"1h"}`, `{"refresh_every":"off"}`}},
	}
	for i, ep := range endpoints {
		for _, s := range append(ep.seeds, `null`, ` null `, `[]`, `{"":0}`) {
			f.Add(uint8(i), []byte(s))
		}
	}

	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		ep := endpoints[int(which)%len(endpoints)]
		fuzzCall(ctx, t, h, ep.method, ep.path, ep.header, body)
	})
}

// fuzzCall sends one fuzzed JSON body and fails on a 5xx or on an error answer outside the one
// error shape.
func fuzzCall(ctx context.Context, t *testing.T, h http.Handler, method, path string, header http.Header, body []byte) {
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	reqCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req.WithContext(reqCtx))
	r := result{Status: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}
	if r.Status >= 500 {
		t.Fatalf("%s %s with body %q: status %d: %s", method, path, body, r.Status, r.Body)
	}
	if r.Status >= 400 {
		errorBody(t, r)
	}
}
