package connector_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/connector"
	"github.com/cohort-dev/cohort/internal/connector/klaviyo"
	"github.com/cohort-dev/cohort/internal/connector/platform"
	"github.com/cohort-dev/cohort/internal/connector/platformfake"
	"github.com/cohort-dev/cohort/internal/safehttp"
	"github.com/cohort-dev/cohort/internal/testenv"
)

// syncLog is a concurrency-safe buffer for a test logger.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// safePlatforms is the adapter factory as the worker builds it: the outbound client is safehttp
// and no extra permanent errors are configured.
func safePlatforms(klaviyoURL string, opts safehttp.Options) *connector.Platforms {
	return &connector.Platforms{
		HTTP:           safehttp.NewClient(opts),
		KlaviyoBaseURL: klaviyoURL,
		Limiters:       platform.NewLimiters(),
		Klaviyo:        klaviyo.Options{PollInterval: time.Millisecond, PollMax: 5 * time.Millisecond},
	}
}

// localhostURL names a loopback fake by the host name "localhost", as a tenant pointing a
// connector at an internal name would.
func localhostURL(raw string) string {
	return strings.Replace(raw, "127.0.0.1", "localhost", 1)
}

// TestBlockedDestinationTellsTheTenantNoAddress: a connector whose platform URL names an internal
// host fails its sync for good, and what the tenant reads (the sync's error, the run's error and
// the connector's last_error, as the workflow stores them) says the destination is not allowed
// without telling what the host resolved to. The server log keeps that detail.
func TestBlockedDestinationTellsTheTenantNoAddress(t *testing.T) {
	f := newFixture(t, connector.Options{AllowHTTP: true})
	tenant := f.tenant("acme")
	seg := f.segment(tenant, "vip")
	f.addMembers(tenant, seg, "u1", "u2")
	f.profiles(tenant, map[string]string{"u1": "u1@example.com", "u2": "u2@example.com"})
	talon := platformfake.NewTalonOne(platformfake.TalonOneOptions{APIKey: fakeKey})
	t.Cleanup(talon.Close)
	talon.CreateAudience(1)
	braze := platformfake.NewBraze(platformfake.BrazeOptions{APIKey: fakeKey})
	t.Cleanup(braze.Close)
	kl := platformfake.NewKlaviyo(platformfake.KlaviyoOptions{APIKey: fakeKey})
	t.Cleanup(kl.Close)
	kl.CreateList("L1")

	logged := &syncLog{}
	platforms := safePlatforms(localhostURL(kl.URL()), safehttp.Options{Timeout: 10 * time.Second, Logger: slog.New(slog.NewTextHandler(logged, nil))})
	cases := []struct{ kind, config string }{
		{connector.KindTalonOne, fmt.Sprintf(`{"base_url":%q,"api_key":%q,"audience_id":1}`, localhostURL(talon.URL()), fakeKey)},
		{connector.KindBraze, fmt.Sprintf(`{"rest_endpoint":%q,"api_key":%q}`, localhostURL(braze.URL()), fakeKey)},
		{connector.KindKlaviyo, fmt.Sprintf(`{"list_id":"L1","api_key":%q}`, fakeKey)},
	}
	for _, tc := range cases {
		t.Run(tc.kind, func(t *testing.T) {
			c := f.create(tenant, seg, tc.kind, tc.kind, tc.config)
			run := f.begin(tenant, c.ID, "wf-blocked-"+tc.kind)
			_, err := f.svc.Push(f.ctx, tenant, run.ID, f.adapter(platforms, tenant, c.ID), nil)
			var pe *platform.Error
			if !errors.As(err, &pe) || pe.Retryable {
				t.Fatalf("push: %v, want a permanent *platform.Error", err)
			}
			// The workflow stores the activity's message, which is the platform error's text.
			if err := f.svc.FinishSync(f.ctx, tenant, run.ID, pe.Error()); err != nil {
				t.Fatal(err)
			}
			got := f.get(tenant, c.ID)
			stored := f.run(tenant, run.ID)
			for what, msg := range map[string]string{"error": err.Error(), "last_error": testenv.Deref(got.LastError), "run error": testenv.Deref(stored.Error)} {
				if !strings.Contains(msg, "destination not allowed") {
					t.Errorf("%s %q, want it to say the destination is not allowed", what, msg)
				}
				for _, leak := range []string{"127.0.0.1", "::1", "dial tcp", "localhost"} {
					if strings.Contains(msg, leak) {
						t.Errorf("%s %q tells the tenant what the host resolves to (%q)", what, msg, leak)
					}
				}
			}
		})
	}
	if n := len(talon.Requests()) + len(braze.Requests()) + len(kl.Requests()); n != 0 {
		t.Errorf("%d requests reached the internal platforms", n)
	}
	if log := logged.String(); !strings.Contains(log, "host=localhost") || !strings.Contains(log, "127.0.0.1") {
		t.Errorf("server log %q, want the refused host and the address it resolved to", log)
	}
}

// TestRedirectLoopIsPermanent: a platform that redirects every request back to itself fails the
// call after the client's redirect limit, once, with an error the activity does not retry.
func TestRedirectLoopIsPermanent(t *testing.T) {
	var hits atomic.Int64
	loop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Redirect(w, r, r.URL.Path, http.StatusFound)
	}))
	t.Cleanup(loop.Close)
	platforms := safePlatforms(loop.URL, safehttp.Options{AllowPrivate: true, Timeout: 10 * time.Second})
	for _, creds := range []connector.Credentials{
		{ConnectorID: 1, SegmentID: 2, Kind: connector.KindKlaviyo, Config: map[string]any{"list_id": "L1"}, Secrets: map[string]string{"api_key": fakeKey}},
		{ConnectorID: 2, SegmentID: 2, Kind: connector.KindBraze, Config: map[string]any{"rest_endpoint": loop.URL}, Secrets: map[string]string{"api_key": fakeKey}},
		{ConnectorID: 3, SegmentID: 2, Kind: connector.KindTalonOne, Config: map[string]any{"base_url": loop.URL, "audience_id": 4.0}, Secrets: map[string]string{"api_key": fakeKey}},
	} {
		t.Run(creds.Kind, func(t *testing.T) {
			a, err := platforms.New(&creds)
			if err != nil {
				t.Fatal(err)
			}
			hits.Store(0)
			_, err = a.Add(t.Context(), []platform.Member{{UserID: "u1", Email: "u1@example.com"}})
			var pe *platform.Error
			if !errors.As(err, &pe) || pe.Retryable || !strings.Contains(pe.Message, "too many redirects") {
				t.Fatalf("error %v, want a permanent *platform.Error about too many redirects", err)
			}
			// One attempt: the first request and the client's redirects, nothing retried in place.
			if n := hits.Load(); n != safehttp.DefaultMaxRedirects+1 {
				t.Errorf("%d requests, want one attempt of %d", n, safehttp.DefaultMaxRedirects+1)
			}
		})
	}
}
