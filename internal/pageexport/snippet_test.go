package pageexport

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/testenv"
	sdkjs "github.com/cohort-dev/cohort/sdk/js"
)

var uuidV7 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// TestHTMLSnippetTracksAnonymousVisitors opens an HTML export, with the real client library
// bundle and under the export's Content-Security-Policy, as two visitors in Chromium (the first
// twice): every page view carries the visitor's anonymous id (a UUIDv7, the same on the second
// load, another for the other visitor) and no user id, and the session handshake carries it too.
func TestHTMLSnippetTracksAnonymousVisitors(t *testing.T) {
	testenv.NodeTools(t)
	sdk := testenv.SDKDir(t)
	requireTool(t, filepath.Join(sdk, "node_modules", "playwright-core", "package.json"), "playwright-core")
	chromium := "/usr/bin/chromium"
	requireTool(t, chromium, "Chromium (Debian's chromium package)")
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is missing: %v", err)
	}

	type event struct {
		UserID      *string `json:"user_id"`
		AnonymousID string  `json:"anonymous_id"`
		EventType   string  `json:"event_type"`
	}
	var (
		mu       sync.Mutex
		events   []event
		sessions []string // anonymous ids of the handshakes
		keys     []string
		exported []byte
		base     string
	)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /page.html", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", HTML.ContentType())
		w.Header().Set("Content-Security-Policy", ContentSecurityPolicy(base))
		_, _ = w.Write(exported)
	})
	mux.HandleFunc("GET "+ScriptPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/javascript")
		_, _ = w.Write(sdkjs.Bundle())
	})
	mux.HandleFunc("POST /api/auth/session/", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			UserID      string `json:"user_id"`
			AnonymousID string `json:"anonymous_id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		sessions = append(sessions, body.AnonymousID)
		keys = append(keys, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"token":"tok","token_type":"Bearer","expires_in":3600}`))
	})
	mux.HandleFunc("POST /api/ingestion/track/batch/", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Events []event `json:"events"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		events = append(events, body.Events...)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"queued":1,"skipped":0,"errors":[]}`))
	})
	mux.HandleFunc("GET /events-count", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n := len(events)
		mu.Unlock()
		_, _ = fmt.Fprint(w, n)
	})
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	ts := httptest.NewServer(mux)
	defer ts.Close()
	base = ts.URL

	c := fullContent("plain", ts.URL)
	if exported, err = RenderHTML(c); err != nil {
		t.Fatal(err)
	}
	out := testenv.RunBrowserScript(t, node, chromium, sdk, filepath.Join("testdata", "anon_visits.mjs"), ts.URL+"/page.html")
	var rep struct {
		ConsoleErrors []string `json:"consoleErrors"`
		PageErrors    []string `json:"pageErrors"`
		Visits        int      `json:"visits"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("report %s: %v", out, err)
	}
	if len(rep.ConsoleErrors) > 0 || len(rep.PageErrors) > 0 || rep.Visits != 3 {
		t.Fatalf("console errors %q, page errors %q, %d visits", rep.ConsoleErrors, rep.PageErrors, rep.Visits)
	}
	// The last page-hide flush may still be on its way.
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		mu.Lock()
		n := len(events)
		mu.Unlock()
		if n >= 3 {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 3 {
		t.Fatalf("%d events, want a page view per visit: %+v", len(events), events)
	}
	for i, e := range events {
		if e.EventType != "page_viewed" || e.UserID != nil || !uuidV7.MatchString(e.AnonymousID) {
			t.Errorf("event %d: %s, user_id %v, anonymous_id %q: want page_viewed with a UUIDv7 anonymous id and no user id", i, e.EventType, e.UserID, e.AnonymousID)
		}
	}
	if events[0].AnonymousID != events[1].AnonymousID {
		t.Errorf("the first visitor's two loads: anonymous ids %q and %q", events[0].AnonymousID, events[1].AnonymousID)
	}
	if events[2].AnonymousID == events[0].AnonymousID {
		t.Errorf("two visitors share the anonymous id %q", events[0].AnonymousID)
	}
	want := []string{events[0].AnonymousID, events[1].AnonymousID, events[2].AnonymousID}
	if !slices.Equal(sessions, want) {
		t.Errorf("handshakes carried anonymous ids %q, want %q", sessions, want)
	}
	for _, k := range keys {
		if k != "ApiKey "+c.Tracking.PublicKey {
			t.Errorf("handshake with %q, want the export's public key", k)
		}
	}
}
