package api

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/page"
	"github.com/cohort-dev/cohort/internal/pageexport"
)

// syncExportStarter records export starts; the test builds them when it chooses.
type syncExportStarter struct {
	mu      sync.Mutex
	started [][2]int64
}

func (s *syncExportStarter) StartExport(_ context.Context, tenantID, exportID int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started = append(s.started, [2]int64{tenantID, exportID})
	return nil
}

// TestPageExportAPI runs an export through the API: 202 pending, queued until built, ready with
// a signed link that downloads the file, refused once changed or past 24 hours; another tenant
// sees none of it; bad input is a 4xx.
func TestPageExportAPI(t *testing.T) {
	e := pagesServer(t, page.Options{})
	starter := &syncExportStarter{}
	svc := pageexport.NewService(pageexport.Deps{Pool: e.f.db.Pool, Pages: e.svc, Keys: pageexport.NewKeys(e.f.db.Pool, nil),
		Blob: e.f.blob, Starter: starter, Now: e.f.blobClock.Now})
	ts := serve(t, e.f.newServer(t, func(d *Deps) {
		d.Pages = &PagesDeps{Service: e.svc}
		d.Exports = &ExportsDeps{Service: svc, PublicURL: "https://api.cohort.test"}
	}))
	a, b := e.f.A, e.f.B
	q := e.query(t, a, `{"text":"linen dresses"}`)
	p := e.page(t, a, `{"query":`+strconv.FormatInt(q.ID, 10)+`,"slug":"linen"}`)
	e.generate(t, a.T.ID, p.ID, `Linen <script>alert(1)</script>`)
	path := "/api/ai-pages/pages/" + strconv.FormatInt(p.ID, 10) + "/export/"

	var none map[string]any
	ok(t, jsonCall(t, ts, http.MethodGet, path, bearer(a), ""), http.StatusNotFound, &none)

	var started pageexport.Started
	ok(t, jsonCall(t, ts, http.MethodPost, path, bearer(a), `{"format":"html"}`), http.StatusAccepted, &started)
	if started.Status != "pending" || started.ExportID <= 0 {
		t.Fatalf("started %+v", started)
	}
	var got map[string]any
	ok(t, jsonCall(t, ts, http.MethodGet, path, bearer(a), ""), http.StatusOK, &got)
	if _, ok := got["download_url"]; ok {
		t.Errorf("download_url present before the export is ready: %v", got)
	}
	if got["status"] != "queued" || got["format"] != "html" || got["download_url"] != nil || got["created_at"] == nil {
		t.Fatalf("queued export %v", got)
	}

	if _, err := svc.Build(context.Background(), a.T.ID, started.ExportID); err != nil {
		t.Fatal(err)
	}
	got = nil
	ok(t, jsonCall(t, ts, http.MethodGet, path+"?export_id="+strconv.FormatInt(started.ExportID, 10), apiKey(a), ""), http.StatusOK, &got)
	link, _ := got["download_url"].(string)
	if got["status"] != "ready" || link == "" || got["expires_at"] == nil {
		t.Fatalf("ready export %v", got)
	}
	exp, err := time.Parse(time.RFC3339Nano, got["expires_at"].(string))
	if err != nil || exp.Sub(e.f.blobClock.Now()) > 24*time.Hour || exp.Sub(e.f.blobClock.Now()) < 23*time.Hour {
		t.Fatalf("expires_at %v (%v), want 24 hours from now", got["expires_at"], err)
	}
	target := strings.TrimPrefix(link, "http://cohort.test")
	dl := send(t, ts, http.MethodGet, target, nil, nil)
	if dl.Status != http.StatusOK || !strings.Contains(string(dl.Body), "Linen &lt;script&gt;alert(1)&lt;/script&gt;") ||
		!strings.Contains(string(dl.Body), `data-cohort-api="https://api.cohort.test"`) || !strings.Contains(string(dl.Body), `data-cohort-key="pk_`) {
		t.Fatalf("download: %d %.300s", dl.Status, dl.Body)
	}
	// A changed signature, and a link past its 24 hours, are refused.
	sigAt := strings.LastIndex(target, "sig=") + 4
	flipped := target[:sigAt] + strings.Map(func(r rune) rune {
		if r == '0' {
			return '1'
		}
		return '0'
	}, target[sigAt:sigAt+1]) + target[sigAt+1:]
	if r := send(t, ts, http.MethodGet, flipped, nil, nil); r.Status != http.StatusForbidden {
		t.Errorf("changed signature: status %d", r.Status)
	}
	e.f.blobClock.Set(24*time.Hour + time.Second)
	if r := send(t, ts, http.MethodGet, target, nil, nil); r.Status != http.StatusForbidden {
		t.Errorf("link past 24 h: status %d", r.Status)
	}
	got = nil // Unmarshal into a map keeps the keys it had
	ok(t, jsonCall(t, ts, http.MethodGet, path, bearer(a), ""), http.StatusOK, &got)
	if got["status"] != "ready" || got["download_url"] != nil {
		t.Errorf("an expired export still hands out a link: %v", got)
	}
	e.f.blobClock.Set(0)

	// Another tenant: 404 for the page and its exports.
	ok(t, jsonCall(t, ts, http.MethodGet, path, bearer(b), ""), http.StatusNotFound, nil)
	ok(t, jsonCall(t, ts, http.MethodGet, path+"?export_id="+strconv.FormatInt(started.ExportID, 10), bearer(b), ""), http.StatusNotFound, nil)
	ok(t, jsonCall(t, ts, http.MethodPost, path, bearer(b), `{"format":"zip"}`), http.StatusNotFound, nil)

	// Bad input: 4xx with the one error shape, never a 5xx.
	for _, tc := range []struct {
		name, method, target, body string
		status                     int
	}{
		{"bad format", http.MethodPost, path, `{"format":"pdf"}`, http.StatusBadRequest},
		{"no format", http.MethodPost, path, `{}`, http.StatusBadRequest},
		{"format not a string", http.MethodPost, path, `{"format":1}`, http.StatusBadRequest},
		{"unknown field", http.MethodPost, path, `{"format":"html","x":1}`, http.StatusBadRequest},
		{"no body", http.MethodPost, path, ``, http.StatusBadRequest},
		{"not json", http.MethodPost, path, `format=html`, http.StatusBadRequest},
		{"huge body", http.MethodPost, path, `{"format":"` + strings.Repeat("x", 10000) + `"}`, http.StatusRequestEntityTooLarge},
		{"bad page id", http.MethodPost, "/api/ai-pages/pages/abc/export/", `{"format":"html"}`, http.StatusNotFound},
		{"unknown page", http.MethodPost, "/api/ai-pages/pages/999999/export/", `{"format":"html"}`, http.StatusNotFound},
		{"bad export id", http.MethodGet, path + "?export_id=x", ``, http.StatusBadRequest},
		{"negative export id", http.MethodGet, path + "?export_id=-1", ``, http.StatusBadRequest},
		{"unknown export", http.MethodGet, path + "?export_id=99999999", ``, http.StatusNotFound},
		{"huge export id", http.MethodGet, path + "?export_id=99999999999999999999999", ``, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body ErrorBody
			ok(t, jsonCall(t, ts, tc.method, tc.target, bearer(a), tc.body), tc.status, &body)
			if body.Error.Code == "" {
				t.Errorf("no error code")
			}
		})
	}
	ok(t, jsonCall(t, ts, http.MethodPost, path, hdr(), `{"format":"html"}`), http.StatusUnauthorized, nil)
	for _, f := range []string{"tsx", "json", "zip"} {
		ok(t, jsonCall(t, ts, http.MethodPost, path, bearer(a), `{"format":"`+f+`"}`), http.StatusAccepted, nil)
	}
	starter.mu.Lock()
	n := len(starter.started)
	starter.mu.Unlock()
	if n != 4 {
		t.Errorf("%d builds started, want 4", n)
	}
}
