package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/design"
	"github.com/cohort-dev/cohort/internal/pagetemplate"
	"github.com/cohort-dev/cohort/internal/safehttp"
)

// designServer is the real API with the design system and template routes over the fixture's
// database; allowPrivate lets the extractor reach the loopback image server.
func designServer(t testing.TB, allowPrivate bool) (*fixture, *httptest.Server) {
	t.Helper()
	f := newFixture(t)
	ts := serve(t, f.newServer(t, func(d *Deps) {
		d.Design = &DesignDeps{Store: design.NewStore(f.db.Pool, time.Now), Extractor: design.NewExtractor(design.ExtractorOptions{
			HTTP: safehttp.NewClient(safehttp.Options{AllowPrivate: allowPrivate, Timeout: 5 * time.Second}), MaxBytes: 1 << 20,
		})}
		d.Templates = &TemplatesDeps{Service: pagetemplate.NewService(f.db.Pool, time.Now)}
	}))
	return f, ts
}

func TestDesignSystemAPI(t *testing.T) {
	f, ts := designServer(t, false)
	var a design.System
	ok(t, jsonCall(t, ts, http.MethodGet, "/api/ai-pages/design-system/", bearer(f.A), ""), http.StatusOK, &a)
	if a.ID == 0 || a.Tenant != f.A.T.ID || a.PrimaryColor == "" || a.HeadingFont == "" || a.UpdatedAt.IsZero() {
		t.Fatalf("default %+v", a)
	}

	var up design.System
	ok(t, jsonCall(t, ts, http.MethodPut, "/api/ai-pages/design-system/", apiKey(f.A),
		`{"primary_color":"#1E40AF","heading_font":"Playfair Display","spacing_unit":12,"custom_css":".hero h1{letter-spacing:-.02em}"}`), http.StatusOK, &up)
	if up.ID != a.ID || up.PrimaryColor != "#1e40af" || up.HeadingFont != "Playfair Display" || up.SpacingUnit != 12 ||
		up.SecondaryColor != a.SecondaryColor || up.BodyFont != a.BodyFont || up.BorderRadius != a.BorderRadius || !up.UpdatedAt.After(a.UpdatedAt) {
		t.Fatalf("updated %+v from %+v", up, a)
	}

	// Tenant B sees its own default, untouched.
	var b design.System
	ok(t, jsonCall(t, ts, http.MethodGet, "/api/ai-pages/design-system/", bearer(f.B), ""), http.StatusOK, &b)
	if b.ID == a.ID || b.Tenant != f.B.T.ID || b.PrimaryColor != a.PrimaryColor {
		t.Fatalf("tenant b %+v", b)
	}

	for _, tc := range []struct {
		name, body string
		status     int
		fields     []string
	}{
		{"bad colors and font", `{"primary_color":"blue","text_color":"#12","heading_font":"Inter;}"}`, 400, []string{"primary_color", "text_color", "heading_font"}},
		{"radius and spacing", `{"border_radius":"4","spacing_unit":65}`, 400, []string{"border_radius", "spacing_unit"}},
		{"style break-out", `{"custom_css":"a{}</style><script>alert(1)</script>"}`, 400, []string{"custom_css"}},
		{"css over 64 KB", `{"custom_css":"` + strings.Repeat("a", 64<<10+1) + `"}`, 400, []string{"custom_css"}},
		{"spacing not an integer", `{"spacing_unit":1.5}`, 400, nil},
		{"spacing a string", `{"spacing_unit":"8"}`, 400, nil},
		{"unknown field", `{"logo":"x"}`, 400, nil},
		{"not an object", `[1]`, 400, nil},
		{"null", `null`, 400, nil},
		{"empty", ``, 400, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := jsonCall(t, ts, http.MethodPut, "/api/ai-pages/design-system/", bearer(f.A), tc.body)
			if r.Status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.Status, tc.status, r.Body)
			}
			e := errorBody(t, r)
			for _, fl := range tc.fields {
				if e.Fields[fl] == "" {
					t.Errorf("no field error on %s: %+v", fl, e)
				}
			}
		})
	}
	var after design.System
	ok(t, jsonCall(t, ts, http.MethodGet, "/api/ai-pages/design-system/", bearer(f.A), ""), http.StatusOK, &after)
	if after.PrimaryColor != "#1e40af" || after.CustomCSS != up.CustomCSS {
		t.Fatalf("refused PUTs changed the design system: %+v", after)
	}
}

// sseEvents reads a text/event-stream body: one "data: <JSON>" line and a blank line per event.
func sseEvents(t *testing.T, body []byte) []design.Event {
	t.Helper()
	var out []design.Event
	sc := bufio.NewScanner(bytes.NewReader(body))
	blank := true
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			blank = true
		case strings.HasPrefix(line, "data: "):
			if !blank {
				t.Fatalf("two data lines without a blank line between: %q", body)
			}
			var e design.Event
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e); err != nil {
				t.Fatalf("event %q: %v", line, err)
			}
			out = append(out, e)
			blank = false
		default:
			t.Fatalf("unexpected line %q", line)
		}
	}
	return out
}

func TestDesignExtractAPI(t *testing.T) {
	img := image.NewNRGBA(image.Rect(0, 0, 200, 120))
	paint := func(r image.Rectangle, c color.NRGBA) {
		for y := r.Min.Y; y < r.Max.Y; y++ {
			for x := r.Min.X; x < r.Max.X; x++ {
				img.SetNRGBA(x, y, c)
			}
		}
	}
	paint(img.Bounds(), color.NRGBA{0xfa, 0xfa, 0xf5, 0xff})
	paint(image.Rect(20, 20, 180, 70), color.NRGBA{0x0f, 0x76, 0x6e, 0xff})
	paint(image.Rect(20, 80, 90, 105), color.NRGBA{0xe1, 0x1d, 0x48, 0xff})
	var pngBytes bytes.Buffer
	if err := png.Encode(&pngBytes, img); err != nil {
		t.Fatal(err)
	}
	images := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/logo.png":
			w.Header().Set("Content-Type", "image/png")
			_, _ = w.Write(pngBytes.Bytes())
		case "/page":
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("<html></html>"))
		case "/huge.png":
			w.Header().Set("Content-Type", "image/png")
			_, _ = w.Write(make([]byte, 2<<20))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(images.Close)

	f, ts := designServer(t, true)
	before := jsonCall(t, ts, http.MethodGet, "/api/ai-pages/design-system/", bearer(f.A), "")

	r := jsonCall(t, ts, http.MethodPost, "/api/ai-pages/design-system/extract/", bearer(f.A), fmt.Sprintf(`{"image_url":%q}`, images.URL+"/logo.png"))
	if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d %s: %s", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	evs := sseEvents(t, r.Body)
	got := map[string]string{}
	for _, e := range evs {
		if e.Type == design.EventExtracted {
			got[e.Field] = e.Value
		}
	}
	want := map[string]string{"primary_color": "#0f766e", "secondary_color": "#e11d48", "background_color": "#fafaf5", "text_color": "#0f766e"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %s (events %+v)", k, got[k], v, evs)
		}
	}
	if last := evs[len(evs)-1]; last.Type != design.EventDone {
		t.Errorf("last event %+v, want done", last)
	}
	after := jsonCall(t, ts, http.MethodGet, "/api/ai-pages/design-system/", bearer(f.A), "")
	if !bytes.Equal(before.Body, after.Body) {
		t.Errorf("extraction saved something: %s -> %s", before.Body, after.Body)
	}

	for _, tc := range []struct{ name, body, want string }{
		{"missing image_url", `{}`, "required"},
		{"not a URL", `{"image_url":"logo.png"}`, "absolute http"},
		{"javascript", `{"image_url":"javascript:alert(1)"}`, "absolute http"},
		{"html page", fmt.Sprintf(`{"image_url":%q}`, images.URL+"/page"), "not a PNG"},
		{"huge", fmt.Sprintf(`{"image_url":%q}`, images.URL+"/huge.png"), "larger than"},
		{"wrong type", `{"image_url":5}`, ""},
		{"unknown field", `{"image_url":"https://example.com/a.png","x":1}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := jsonCall(t, ts, http.MethodPost, "/api/ai-pages/design-system/extract/", apiKey(f.A), tc.body)
			if r.Status != http.StatusBadRequest {
				t.Fatalf("status %d: %s", r.Status, r.Body)
			}
			if e := errorBody(t, r); !strings.Contains(e.Message+e.Fields["image_url"], tc.want) {
				t.Errorf("error %+v does not say %q", e, tc.want)
			}
		})
	}

	t.Run("loopback refused without private networks", func(t *testing.T) {
		f2, strict := designServer(t, false)
		r := jsonCall(t, strict, http.MethodPost, "/api/ai-pages/design-system/extract/", bearer(f2.A), fmt.Sprintf(`{"image_url":%q}`, images.URL+"/logo.png"))
		if r.Status != http.StatusBadRequest {
			t.Fatalf("status %d: %s", r.Status, r.Body)
		}
		e := errorBody(t, r)
		if !strings.Contains(e.Message, "not allowed") || strings.Contains(string(r.Body), "127.0.0.1") || strings.Contains(string(r.Body), "dial") {
			t.Errorf("refusal %s", r.Body)
		}
	})
}

func TestDesignExtractUnavailable(t *testing.T) {
	f := newFixture(t)
	ts := serve(t, f.newServer(t, func(d *Deps) { d.Design = &DesignDeps{} }))
	for _, c := range []struct{ method, path, body string }{
		{http.MethodGet, "/api/ai-pages/design-system/", ""},
		{http.MethodPost, "/api/ai-pages/design-system/extract/", `{"image_url":"https://example.com/a.png"}`},
	} {
		r := jsonCall(t, ts, c.method, c.path, bearer(f.A), c.body)
		if r.Status != http.StatusServiceUnavailable {
			t.Errorf("%s %s: %d %s", c.method, c.path, r.Status, r.Body)
		}
		errorBody(t, r)
	}
}

// FuzzDesignTemplateBodies sends fuzzed bodies to the design system and template endpoints:
// never a 5xx, every 4xx in the one error shape. Run it with
//
//	go test ./api -run '^$' -fuzz FuzzDesignTemplateBodies -fuzztime 30s
func FuzzDesignTemplateBodies(f *testing.F) {
	fx := newFixture(f)
	h := fx.newServer(f, func(d *Deps) {
		d.Design = &DesignDeps{Store: design.NewStore(fx.db.Pool, time.Now), Extractor: design.NewExtractor(design.ExtractorOptions{
			HTTP: safehttp.NewClient(safehttp.Options{Timeout: 2 * time.Second}), FetchTimeout: 2 * time.Second,
		})}
		d.Templates = &TemplatesDeps{Service: pagetemplate.NewService(fx.db.Pool, time.Now)}
	}).Handler()
	ctx := context.Background()
	sk := apiKey(fx.A)
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/api/ai-pages/templates/", strings.NewReader(`{"name":"t","blocks":[{"type":"hero","props":{"headline":"h"}}]}`))
	req.Header = sk.Clone()
	req.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(rec, req)
	var tpl pagetemplate.Template
	if rec.Code != http.StatusCreated || json.Unmarshal(rec.Body.Bytes(), &tpl) != nil {
		f.Fatalf("setup template: %d %s", rec.Code, rec.Body)
	}
	endpoints := []fuzzEndpoint{
		{http.MethodPut, "/api/ai-pages/design-system/", sk, []string{`{"primary_color":"#fff","spacing_unit":4}`, `{"custom_css":"a{}","border_radius":"1rem"}`, `{"heading_font":"Inter"}`}},
		// Only refusals before any fetch: the seeds and most mutations are not fetchable URLs.
		{http.MethodPost, "/api/ai-pages/design-system/extract/", sk, []string{`{"image_url":"ftp://x"}`, `{"image_url":""}`, `{"image_url":"http://127.0.0.1:1/a.png"}`}},
		{http.MethodPost, "/api/ai-pages/templates/", sk, []string{`{"name":"a","blocks":[],"tags":["x"]}`, `{"name":"b","description":"d","blocks":[{"type":"cta_banner","props":{}}]}`}},
		{http.MethodPatch, fmt.Sprintf("/api/ai-pages/templates/%d/", tpl.ID), sk, []string{`{"name":"c"}`, `{"blocks":[{"type":"hero","props":{"headline":"x"}}],"tags":[]}`}},
	}
	for i, ep := range endpoints {
		for _, s := range append(ep.seeds, `null`, `[]`, `{"":0}`) {
			f.Add(uint8(i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		ep := endpoints[int(which)%len(endpoints)]
		fuzzCall(ctx, t, h, ep.method, ep.path, ep.header, body)
	})
}
