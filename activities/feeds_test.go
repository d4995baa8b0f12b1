package activities

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/feed"
	"github.com/cohort-dev/cohort/internal/testenv"
)

// TestSyncFeed runs the activity over real Postgres and a loopback feed: the counts of a synced
// feed, heartbeats with the items read, and each failure as the workflow needs it (permanent,
// retryable or gone), with a message fit for the feed's last_error.
func TestSyncFeed(t *testing.T) {
	db := testenv.OpenDB(t)
	ctx := context.Background()
	tenant := testenv.Tenant(t, db, "feed-activity")
	cat := catalog.NewService(db.Pool, time.Now)
	if _, err := cat.PutSchema(ctx, tenant, catalog.Schema{Fields: []catalog.Field{{Name: "price", Type: catalog.TypePrice}}}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok.json":
			fmt.Fprint(w, `{"products":[{"sku":"P-1","name":"One","price":"9.90 USD"},{"sku":"P-2","name":"Two","price":"oops"}]}`)
		case "/busy.json":
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	svc := feed.NewService(db.Pool, cat, nil, time.Now, feed.Options{AllowPrivate: true})
	acts := &Feeds{Svc: svc}
	newFeed := func(path string) int64 {
		f, err := svc.Create(ctx, tenant, feed.Input{Name: path, URL: srv.URL + path, Format: "json",
			FieldMap: map[string]string{"sku": "sku", "name": "name", "price": "price"}})
		if err != nil {
			t.Fatal(err)
		}
		return f.ID
	}
	run := func(feedID int64) (SyncFeedResult, []int, error) {
		var s testsuite.WorkflowTestSuite
		env := s.NewTestActivityEnvironment()
		var beats []int
		env.SetOnActivityHeartbeatListener(func(_ *activity.Info, details converter.EncodedValues) {
			var n int
			if details.Get(&n) == nil {
				beats = append(beats, n)
			}
		})
		env.RegisterActivity(acts)
		v, err := env.ExecuteActivity(acts.SyncFeed, SyncFeedInput{TenantID: tenant, FeedID: feedID})
		var res SyncFeedResult
		if err == nil {
			err = v.Get(&res)
		}
		return res, beats, err
	}

	res, beats, err := run(newFeed("/ok.json"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (SyncFeedResult{Total: 2, Created: 1, Failed: 1}); res != want {
		t.Errorf("result %+v, want %+v", res, want)
	}
	if len(beats) == 0 || beats[len(beats)-1] != 2 {
		t.Errorf("heartbeats %v", beats)
	}

	deleted := newFeed("/ok.json")
	if err := svc.Delete(ctx, tenant, deleted); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		feedID    int64
		typ       string
		retryable bool
		msg       string
	}{
		{"not found", newFeed("/missing.json"), ErrTypeFeedSyncFailed, false, "answered HTTP 404"},
		{"busy", newFeed("/busy.json"), ErrTypeFeedUnavailable, true, "answered HTTP 503"},
		{"deleted", deleted, ErrTypeFeedGone, false, "feed deleted"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := run(c.feedID)
			var app *temporal.ApplicationError
			if !errors.As(err, &app) || app.Type() != c.typ || app.NonRetryable() == c.retryable || !strings.Contains(app.Message(), c.msg) {
				t.Fatalf("error %v, want %s (retryable %v) saying %q", err, c.typ, c.retryable, c.msg)
			}
			if strings.Contains(app.Message(), "127.0.0.1:") {
				t.Errorf("message names the address: %q", app.Message())
			}
		})
	}

	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(acts)
	failed := newFeed("/missing.json")
	if _, err := env.ExecuteActivity(acts.FailFeedSync, FailFeedSyncInput{TenantID: tenant, FeedID: failed, Reason: "the feed's host answered HTTP 404"}); err != nil {
		t.Fatal(err)
	}
	f, err := svc.Get(ctx, tenant, failed)
	if err != nil || f.Status != feed.StatusError || f.LastError == nil || *f.LastError != "the feed's host answered HTTP 404" {
		t.Errorf("FailFeedSync did not record the failure on the feed: %+v %v", f, err)
	}
}
