package platform_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/connector/platform"
	"github.com/cohort-dev/cohort/internal/safehttp"
)

const secretKey = "sk_live_TOPSECRET_4f3e2d1c"

// reply is one scripted answer.
type reply struct {
	status int
	header map[string]string
	body   string
}

// seen is one request the scripted server received.
type seen struct {
	method, path, auth string
	body               string
}

// scripted is a server answering its replies in order (the last one repeats).
type scripted struct {
	*httptest.Server
	mu      sync.Mutex
	replies []reply
	reqs    []seen
}

func newScripted(t *testing.T, replies ...reply) *scripted {
	t.Helper()
	s := &scripted{replies: replies}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.reqs = append(s.reqs, seen{method: r.Method, path: r.URL.Path, auth: r.Header.Get("Authorization"), body: string(b)})
		rep := s.replies[min(len(s.reqs), len(s.replies))-1]
		s.mu.Unlock()
		for k, v := range rep.header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(rep.status)
		_, _ = io.WriteString(w, rep.body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *scripted) requests() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

// sleeps records the waits a Caller asks for instead of sleeping.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.d = append(s.d, d)
	return ctx.Err()
}

func (s *sleeps) all() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.d)
}

var clockNow = time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)

// jsonMessage reads {"message": ...}, like the Braze and Talon.One adapters.
func jsonMessage(body []byte) string {
	var doc struct {
		Message string `json:"message"`
	}
	_ = json.Unmarshal(body, &doc)
	return doc.Message
}

func newCaller(hc *http.Client, sl *sleeps) *platform.Caller {
	return &platform.Caller{
		Platform: "acme",
		HTTP:     hc,
		Header:   func(h http.Header) { h.Set("Authorization", "Bearer "+secretKey) },
		Message:  jsonMessage,
		Secrets:  []string{secretKey},
		Sleep:    sl.sleep,
		Now:      func() time.Time { return clockNow },
	}
}

func TestCallerDo(t *testing.T) {
	ok := reply{status: 200, body: `{"ok":true}`}
	r429 := func(h map[string]string) reply {
		return reply{status: 429, header: h, body: `{"message":"slow down"}`}
	}
	cases := []struct {
		name        string
		replies     []reply
		max429      int
		maxWait     time.Duration
		wantWaits   []time.Duration
		wantReqs    int
		wantStatus  int
		wantBody    string
		wantErr     bool
		retryable   bool
		retryAfter  time.Duration
		wantMessage string
	}{
		{name: "200 returns the body", replies: []reply{ok},
			wantReqs: 1, wantStatus: 200, wantBody: `{"ok":true}`},
		{name: "204 without a body", replies: []reply{{status: 204}},
			wantReqs: 1, wantStatus: 204},
		{name: "429 Retry-After seconds waited out, then success", replies: []reply{r429(map[string]string{"Retry-After": "2"}), ok},
			wantWaits: []time.Duration{2 * time.Second}, wantReqs: 2, wantStatus: 200, wantBody: `{"ok":true}`},
		{name: "429 fractional Retry-After", replies: []reply{r429(map[string]string{"Retry-After": "0.5"}), ok},
			wantWaits: []time.Duration{500 * time.Millisecond}, wantReqs: 2, wantStatus: 200, wantBody: `{"ok":true}`},
		{name: "429 Retry-After 0 waits the 100ms floor", replies: []reply{r429(map[string]string{"Retry-After": "0"}), ok},
			wantWaits: []time.Duration{100 * time.Millisecond}, wantReqs: 2, wantStatus: 200, wantBody: `{"ok":true}`},
		{name: "429 Retry-After HTTP date", replies: []reply{r429(map[string]string{"Retry-After": clockNow.Add(3 * time.Second).Format(http.TimeFormat)}), ok},
			wantWaits: []time.Duration{3 * time.Second}, wantReqs: 2, wantStatus: 200, wantBody: `{"ok":true}`},
		{name: "429 X-RateLimit-Reset epoch", replies: []reply{r429(map[string]string{"X-RateLimit-Reset": strconv.FormatInt(clockNow.Add(7*time.Second).Unix(), 10)}), ok},
			wantWaits: []time.Duration{7 * time.Second}, wantReqs: 2, wantStatus: 200, wantBody: `{"ok":true}`},
		{name: "429 X-RateLimit-Reset in the past", replies: []reply{r429(map[string]string{"X-RateLimit-Reset": strconv.FormatInt(clockNow.Add(-time.Minute).Unix(), 10)}), ok},
			wantWaits: []time.Duration{100 * time.Millisecond}, wantReqs: 2, wantStatus: 200, wantBody: `{"ok":true}`},
		{name: "429 Retry-After wins over X-RateLimit-Reset", replies: []reply{r429(map[string]string{"Retry-After": "4", "X-RateLimit-Reset": strconv.FormatInt(clockNow.Add(30*time.Second).Unix(), 10)}), ok},
			wantWaits: []time.Duration{4 * time.Second}, wantReqs: 2, wantStatus: 200, wantBody: `{"ok":true}`},
		{name: "429 unreadable Retry-After falls back to X-RateLimit-Reset", replies: []reply{r429(map[string]string{"Retry-After": "soon", "X-RateLimit-Reset": strconv.FormatInt(clockNow.Add(5*time.Second).Unix(), 10)}), ok},
			wantWaits: []time.Duration{5 * time.Second}, wantReqs: 2, wantStatus: 200, wantBody: `{"ok":true}`},
		{name: "429 without a hint waits a second", replies: []reply{r429(nil), ok},
			wantWaits: []time.Duration{time.Second}, wantReqs: 2, wantStatus: 200, wantBody: `{"ok":true}`},
		{name: "429 several times within Max429Waits", replies: []reply{r429(map[string]string{"Retry-After": "1"}), r429(map[string]string{"Retry-After": "2"}), ok},
			max429: 2, wantWaits: []time.Duration{time.Second, 2 * time.Second}, wantReqs: 3, wantStatus: 200, wantBody: `{"ok":true}`},
		{name: "429 more than Max429Waits", replies: []reply{r429(map[string]string{"Retry-After": "3"})},
			max429: 2, wantWaits: []time.Duration{3 * time.Second, 3 * time.Second}, wantReqs: 3, wantStatus: 429,
			wantErr: true, retryable: true, retryAfter: 3 * time.Second, wantMessage: "slow down"},
		{name: "429 default Max429Waits is 5", replies: []reply{r429(map[string]string{"Retry-After": "1"})},
			wantWaits: slices.Repeat([]time.Duration{time.Second}, 5), wantReqs: 6, wantStatus: 429,
			wantErr: true, retryable: true, retryAfter: time.Second, wantMessage: "slow down"},
		{name: "429 longer than MaxWait is not waited in place", replies: []reply{r429(map[string]string{"Retry-After": "120"})},
			wantReqs: 1, wantStatus: 429, wantErr: true, retryable: true, retryAfter: 2 * time.Minute, wantMessage: "slow down"},
		{name: "429 within a custom MaxWait", replies: []reply{r429(map[string]string{"Retry-After": "90"}), ok},
			maxWait: 2 * time.Minute, wantWaits: []time.Duration{90 * time.Second}, wantReqs: 2, wantStatus: 200, wantBody: `{"ok":true}`},
		{name: "429 beyond a custom MaxWait", replies: []reply{r429(map[string]string{"Retry-After": "11"})},
			maxWait: 10 * time.Second, wantReqs: 1, wantStatus: 429, wantErr: true, retryable: true, retryAfter: 11 * time.Second, wantMessage: "slow down"},
		{name: "500 retryable", replies: []reply{{status: 500, body: `{"message":"internal error"}`}},
			wantReqs: 1, wantStatus: 500, wantErr: true, retryable: true, wantMessage: "internal error"},
		{name: "502 retryable", replies: []reply{{status: 502, body: "<html>bad gateway</html>"}},
			wantReqs: 1, wantStatus: 502, wantErr: true, retryable: true, wantMessage: "<html>bad gateway</html>"},
		{name: "503 retryable", replies: []reply{{status: 503, body: `{"message":"maintenance"}`}},
			wantReqs: 1, wantStatus: 503, wantErr: true, retryable: true, wantMessage: "maintenance"},
		{name: "408 retryable", replies: []reply{{status: 408}},
			wantReqs: 1, wantStatus: 408, wantErr: true, retryable: true, wantMessage: "Request Timeout"},
		{name: "400 permanent with the platform message", replies: []reply{{status: 400, body: `{"message":"attributes[0] is invalid"}`}},
			wantReqs: 1, wantStatus: 400, wantErr: true, wantMessage: "attributes[0] is invalid"},
		{name: "401 permanent", replies: []reply{{status: 401, body: `{"message":"Invalid API key"}`}},
			wantReqs: 1, wantStatus: 401, wantErr: true, wantMessage: "Invalid API key"},
		{name: "403 permanent", replies: []reply{{status: 403, body: `{"message":"missing users.track permission"}`}},
			wantReqs: 1, wantStatus: 403, wantErr: true, wantMessage: "missing users.track permission"},
		{name: "404 permanent", replies: []reply{{status: 404, body: `{"message":"audience 9 not found"}`}},
			wantReqs: 1, wantStatus: 404, wantErr: true, wantMessage: "audience 9 not found"},
		{name: "4xx without a JSON message uses the body", replies: []reply{{status: 422, body: "  plain text reason \n"}},
			wantReqs: 1, wantStatus: 422, wantErr: true, wantMessage: "plain text reason"},
		{name: "4xx with an empty body uses the status text", replies: []reply{{status: 404}},
			wantReqs: 1, wantStatus: 404, wantErr: true, wantMessage: "Not Found"},
		{name: "long bodies are cut at 300 characters", replies: []reply{{status: 400, body: strings.Repeat("e", 1000)}},
			wantReqs: 1, wantStatus: 400, wantErr: true, wantMessage: strings.Repeat("e", 300) + "..."},
		{name: "3xx is not followed into success", replies: []reply{{status: 304}},
			wantReqs: 1, wantStatus: 304, wantErr: true, wantMessage: "Not Modified"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := newScripted(t, tc.replies...)
			sl := &sleeps{}
			var groups []string
			c := newCaller(srv.Client(), sl)
			c.Max429Waits = tc.max429
			c.MaxWait = tc.maxWait
			c.Limiter = func(group string) *platform.Limiter {
				groups = append(groups, group)
				return nil
			}
			status, body, err := c.Do(context.Background(), "g1", http.MethodPost, srv.URL+"/v1/things", []byte(`{"n":1}`), 1<<10)
			if status != tc.wantStatus {
				t.Errorf("status %d, want %d", status, tc.wantStatus)
			}
			if string(body) != tc.wantBody {
				t.Errorf("body %q, want %q", body, tc.wantBody)
			}
			if got := sl.all(); !slices.Equal(got, tc.wantWaits) {
				t.Errorf("waits %v, want %v", got, tc.wantWaits)
			}
			reqs := srv.requests()
			if len(reqs) != tc.wantReqs {
				t.Errorf("%d requests, want %d", len(reqs), tc.wantReqs)
			}
			for i, r := range reqs {
				if r.method != http.MethodPost || r.path != "/v1/things" || r.body != `{"n":1}` || r.auth != "Bearer "+secretKey {
					t.Errorf("request %d: %+v, want the same POST with body and header every time", i, r)
				}
			}
			if len(groups) != len(reqs) || slices.ContainsFunc(groups, func(g string) bool { return g != "g1" }) {
				t.Errorf("limiter consulted for %v, want g1 before each of the %d requests", groups, len(reqs))
			}
			if !tc.wantErr {
				if err != nil {
					t.Fatalf("error %v", err)
				}
				return
			}
			var pe *platform.Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T), want *platform.Error", err, err)
			}
			want := &platform.Error{Platform: "acme", Status: tc.wantStatus, Message: tc.wantMessage, Retryable: tc.retryable, RetryAfter: tc.retryAfter}
			if *pe != *want {
				t.Errorf("error %+v, want %+v", *pe, *want)
			}
			if got, want := pe.Error(), fmt.Sprintf("acme: HTTP %d: %s", tc.wantStatus, tc.wantMessage); got != want {
				t.Errorf("Error() %q, want %q", got, want)
			}
		})
	}
}

// TestCallerNeverLeaksTheKey: a platform echoing the key, in its message or its raw body, or a
// URL carrying it, never puts it into an error.
func TestCallerNeverLeaksTheKey(t *testing.T) {
	cases := []struct {
		name  string
		reply reply
		path  string
	}{
		{"JSON message echoes the key", reply{status: 401, body: `{"message":"Invalid API key: ` + secretKey + `"}`}, "/"},
		{"raw body echoes the key", reply{status: 400, body: "bad header Authorization: Bearer " + secretKey}, "/"},
		{"key echoed twice in a 500", reply{status: 500, body: `{"message":"` + secretKey + ` / ` + secretKey + `"}`}, "/"},
		{"key echoed in a 429", reply{status: 429, header: map[string]string{"Retry-After": "600"}, body: `{"message":"throttled ` + secretKey + `"}`}, "/"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := newScripted(t, tc.reply)
			c := newCaller(srv.Client(), &sleeps{})
			_, _, err := c.Do(context.Background(), "", http.MethodGet, srv.URL+tc.path, nil, 1<<10)
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if strings.Contains(msg, secretKey) {
				t.Fatalf("error %q carries the key", msg)
			}
			// Not even a recognisable piece of it.
			if strings.Contains(msg, secretKey[:10]) {
				t.Errorf("error %q carries the start of the key %q", msg, secretKey[:10])
			}
		})
	}

	t.Run("network error with the key in the URL", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		u := srv.URL
		srv.Close()
		c := newCaller(http.DefaultClient, &sleeps{})
		_, _, err := c.Do(context.Background(), "", http.MethodGet, u+"/x?api_key="+secretKey, nil, 1<<10)
		var pe *platform.Error
		if !errors.As(err, &pe) {
			t.Fatalf("error %v, want *platform.Error", err)
		}
		if strings.Contains(pe.Message, secretKey) || !strings.Contains(pe.Message, "***") {
			t.Errorf("message %q: want the key replaced by ***", pe.Message)
		}
	})
}

// TestCallerCutBodyLeaksNoPieceOfTheKey: a raw error body longer than 300 characters is cut;
// a key straddling the cut must not leave its first characters in the message.
//
// Do scrubs the body before cutting it to 300 characters, so no prefix of the key survives the
// cut.
func TestCallerCutBodyLeaksNoPieceOfTheKey(t *testing.T) {
	srv := newScripted(t, reply{status: 502, body: strings.Repeat("x", 290) + secretKey + strings.Repeat("y", 50)})
	c := newCaller(srv.Client(), &sleeps{})
	_, _, err := c.Do(context.Background(), "", http.MethodGet, srv.URL, nil, 1<<10)
	if err == nil {
		t.Fatal("no error")
	}
	if strings.Contains(err.Error(), secretKey[:10]) {
		t.Errorf("error %q carries the start of the key %q", err, secretKey[:10])
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

var errBlocked = errors.New("safehttp: blocked address")

func TestCallerNetworkErrors(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()

	cases := []struct {
		name      string
		client    *http.Client
		url       string
		permanent []error
		retryable bool
	}{
		{"connection refused is retryable", http.DefaultClient, closedURL + "/x", nil, true},
		{"a listed permanent error is not", &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
			return nil, fmt.Errorf("dial 10.0.0.1:443: %w", errBlocked)
		})}, "https://10.0.0.1/x", []error{errBlocked}, false},
		{"an unlisted error stays retryable", &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
			return nil, errors.New("connection reset by peer")
		})}, "https://api.example.com/x", []error{errBlocked}, true},
		{"safehttp's blocked destination is permanent unlisted", &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
			return nil, fmt.Errorf("host internal.corp: %w", safehttp.ErrBlockedAddress)
		})}, "https://internal.corp/x", nil, false},
		{"safehttp's redirect loop is permanent unlisted", &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
			return nil, fmt.Errorf("redirect to api.example.com: stopped after 5: %w", safehttp.ErrTooManyRedirects)
		})}, "https://api.example.com/x", nil, false},
		{"safehttp's bad url is permanent unlisted", &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
			return nil, fmt.Errorf("redirect to x: %w", safehttp.ErrBadURL)
		})}, "https://api.example.com/x", nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCaller(tc.client, &sleeps{})
			c.PermanentNetworkErrors = tc.permanent
			status, body, err := c.Do(context.Background(), "", http.MethodPost, tc.url, []byte("{}"), 1<<10)
			var pe *platform.Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T), want *platform.Error", err, err)
			}
			if pe.Retryable != tc.retryable || pe.Status != 0 || status != 0 || body != nil || pe.Platform != "acme" || pe.Message == "" {
				t.Errorf("error %+v status %d: want retryable=%v without a status", *pe, status, tc.retryable)
			}
			if !strings.HasPrefix(pe.Error(), "acme: ") || strings.Contains(pe.Error(), "HTTP") {
				t.Errorf("Error() %q, want \"acme: <message>\"", pe.Error())
			}

			if strings.Contains(tc.name, "blocked destination") && (pe.Message != "destination not allowed: the platform URL must reach a public address" ||
				strings.Contains(pe.Error(), "internal.corp")) {
				t.Errorf("a blocked destination reads %q, want only that the destination is not allowed", pe.Error())
			}
		})
	}
}

func TestCallerContext(t *testing.T) {
	t.Run("cancelled while waiting out a 429", func(t *testing.T) {
		srv := newScripted(t, reply{status: 429, header: map[string]string{"Retry-After": "30"}})
		c := newCaller(srv.Client(), nil)
		c.Sleep = nil // the real timer
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, _, err := c.Do(ctx, "", http.MethodGet, srv.URL, nil, 1<<10)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("error %v, want the context's deadline", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("Do took %v after its context ended", d)
		}
	})
	t.Run("already cancelled", func(t *testing.T) {
		srv := newScripted(t, reply{status: 200})
		c := newCaller(srv.Client(), &sleeps{})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, _, err := c.Do(ctx, "", http.MethodGet, srv.URL, nil, 1<<10); !errors.Is(err, context.Canceled) {
			t.Errorf("error %v, want context.Canceled", err)
		}
		if n := len(srv.requests()); n != 0 {
			t.Errorf("%d requests sent with a cancelled context", n)
		}
	})
}

func TestCallerAnswerTooLarge(t *testing.T) {
	srv := newScripted(t, reply{status: 200, body: strings.Repeat("a", 2048)})
	c := newCaller(srv.Client(), &sleeps{})
	status, body, err := c.Do(context.Background(), "", http.MethodGet, srv.URL, nil, 1024)
	var pe *platform.Error
	if !errors.As(err, &pe) || pe.Retryable || pe.Status != 200 || !strings.Contains(pe.Message, "larger than 1024 bytes") {
		t.Errorf("error %v, want a permanent 'answer larger than 1024 bytes'", err)
	}
	if status != 200 || body != nil {
		t.Errorf("status %d body %d bytes", status, len(body))
	}
	// Exactly at the bound is fine.
	srv = newScripted(t, reply{status: 200, body: strings.Repeat("a", 1024)})
	if _, body, err := newCaller(srv.Client(), &sleeps{}).Do(context.Background(), "", http.MethodGet, srv.URL, nil, 1024); err != nil || len(body) != 1024 {
		t.Errorf("a 1024-byte answer: %d bytes, %v", len(body), err)
	}
}

// TestCallerHugeRetryAfter: a Retry-After too large to be a time.Duration is a wait longer than
// MaxWait: not waited in place, and the error's RetryAfter is not negative.
//
// retryAfter clamps the seconds to a day before converting them, so a value beyond what a
// Duration holds does not overflow into a negative wait that would be waited out in place.
func TestCallerHugeRetryAfter(t *testing.T) {
	srv := newScripted(t, reply{status: 429, header: map[string]string{"Retry-After": "99999999999"}})
	sl := &sleeps{}
	c := newCaller(srv.Client(), sl)
	_, _, err := c.Do(context.Background(), "", http.MethodGet, srv.URL, nil, 1<<10)
	var pe *platform.Error
	if !errors.As(err, &pe) || !pe.Retryable {
		t.Fatalf("error %v, want retryable", err)
	}
	if w := sl.all(); len(w) != 0 {
		t.Errorf("waited %v in place for a Retry-After of 3,000 years", w)
	}
	if pe.RetryAfter < time.Minute {
		t.Errorf("RetryAfter %v, want a long positive wait", pe.RetryAfter)
	}
}

func TestScrub(t *testing.T) {
	cases := []struct {
		name    string
		s       string
		secrets []string
		want    string
	}{
		{"every occurrence", "k=abcd1234 again abcd1234", []string{"abcd1234"}, "k=*** again ***"},
		{"several secrets", "a=secret-one b=secret-two", []string{"secret-one", "secret-two"}, "a=*** b=***"},
		{"short secrets are left alone", "id=abc", []string{"abc"}, "id=abc"},
		{"four characters are scrubbed", "id=abcd", []string{"abcd"}, "id=***"},
		{"empty secret", "nothing to do", []string{""}, "nothing to do"},
		{"no secrets", "plain", nil, "plain"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := platform.Scrub(tc.s, tc.secrets...); got != tc.want {
				t.Errorf("Scrub(%q) = %q, want %q", tc.s, got, tc.want)
			}
		})
	}
}
