package braze_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/connector/braze"
	"github.com/cohort-dev/cohort/internal/connector/platform"
	"github.com/cohort-dev/cohort/internal/connector/platformfake"
)

const (
	apiKey = "b-rest-key-SECRET-7c6b5a49"
	attr   = "cohort_segment_42"
)

var ctx = context.Background()

func newFake(t *testing.T, o platformfake.BrazeOptions) *platformfake.Braze {
	t.Helper()
	if o.APIKey == "" {
		o.APIKey = apiKey
	}
	b := platformfake.NewBraze(o)
	t.Cleanup(b.Close)
	return b
}

func newAdapter(b *platformfake.Braze, key string) *braze.Adapter {
	return braze.New(braze.Config{RESTEndpoint: b.URL() + "/", APIKey: key, Attribute: attr}, &http.Client{Timeout: 10 * time.Second},
		platform.NewLimiters().Get)
}

func members(ids ...string) []platform.Member {
	out := make([]platform.Member, len(ids))
	for i, id := range ids {
		out[i] = platform.Member{UserID: id, Email: id + "@example.com"}
	}
	return out
}

func ids(ms []platform.Member) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.UserID)
	}
	return out
}

// trackBodies decodes the attribute objects of each /users/track request.
func trackBodies(t *testing.T, b *platformfake.Braze) [][]map[string]any {
	t.Helper()
	var out [][]map[string]any
	for _, r := range b.Requests() {
		if r.Method != http.MethodPost || r.Path != "/users/track" {
			t.Errorf("request %s %s, want POST /users/track", r.Method, r.Path)
			continue
		}
		var doc struct {
			Attributes []map[string]any `json:"attributes"`
		}
		if err := json.Unmarshal(r.Body, &doc); err != nil {
			t.Fatal(err)
		}
		out = append(out, doc.Attributes)
	}
	return out
}

func TestChunks(t *testing.T) {
	a := newAdapter(newFake(t, platformfake.BrazeOptions{}), apiKey)
	if a.AddChunk() != 75 || a.RemoveChunk() != 75 {
		t.Errorf("chunks %d/%d, want 75/75", a.AddChunk(), a.RemoveChunk())
	}
}

func TestAddAndRemove(t *testing.T) {
	b := newFake(t, platformfake.BrazeOptions{PerThreeSeconds: 3000})
	a := newAdapter(b, apiKey)
	steps := []struct {
		name      string
		add       bool
		members   []string
		wantTrue  []string
		wantFalse []string
	}{
		{"add sets the attribute true", true, []string{"u1", "u2", "u3"}, []string{"u1", "u2", "u3"}, []string{}},
		{"remove sets it false", false, []string{"u2"}, []string{"u1", "u3"}, []string{"u2"}},
		{"adding again is harmless", true, []string{"u1", "u2"}, []string{"u1", "u2", "u3"}, []string{}},
		{"removing someone Braze never saw creates them with false", false, []string{"u9"}, []string{"u1", "u2", "u3"}, []string{"u9"}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			b.Reset()
			var out platform.Outcome
			var err error
			if s.add {
				out, err = a.Add(ctx, members(s.members...))
			} else {
				out, err = a.Remove(ctx, members(s.members...))
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ids(out.Done), s.members) || out.Failed != 0 || out.Skipped != 0 {
				t.Errorf("outcome %+v, want all of %v done", out, s.members)
			}
			if got := b.UsersWith(attr, true); !slices.Equal(got, s.wantTrue) {
				t.Errorf("%s=true: %v, want %v", attr, got, s.wantTrue)
			}
			if got := b.UsersWith(attr, false); !slices.Equal(got, s.wantFalse) {
				t.Errorf("%s=false: %v, want %v", attr, got, s.wantFalse)
			}
			bodies := trackBodies(t, b)
			if len(bodies) != 1 || len(bodies[0]) != len(s.members) {
				t.Fatalf("bodies %v, want one with %d objects", bodies, len(s.members))
			}
			for i, obj := range bodies[0] {
				want := map[string]any{"external_id": s.members[i], attr: s.add}
				if fmt.Sprint(obj) != fmt.Sprint(want) {
					t.Errorf("object %d: %v, want exactly %v", i, obj, want)
				}
			}
			r := b.Requests()[0]
			if r.Header.Get("Authorization") != "Bearer "+apiKey || r.Header.Get("Content-Type") != "application/json" {
				t.Errorf("headers %v", r.Header)
			}
		})
	}
	if v := b.Violations(); len(v) > 0 {
		t.Errorf("violations: %v", v)
	}
}

func TestNothingToSendSendsNothing(t *testing.T) {
	b := newFake(t, platformfake.BrazeOptions{})
	out, err := newAdapter(b, apiKey).Add(ctx, nil)
	if err != nil || len(out.Done) != 0 || b.RequestCount("", "/") != 0 {
		t.Errorf("empty add: %+v %v, %d requests", out, err, b.RequestCount("", "/"))
	}
}

// TestPerObjectErrors: Braze accepts the request (201) but rejects one object by index; that
// member is failed (and named), the others done.
func TestPerObjectErrors(t *testing.T) {
	b := newFake(t, platformfake.BrazeOptions{})
	out, err := newAdapter(b, apiKey).Add(ctx, []platform.Member{{UserID: "u1"}, {UserID: ""}, {UserID: "u3"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(out.Done), []string{"u1", "u3"}) || out.Failed != 1 || !slices.Equal(ids(out.FailedMembers), []string{""}) {
		t.Errorf("outcome %+v, want u1 and u3 done, the empty id failed", out)
	}
	if got := b.UsersWith(attr, true); !slices.Equal(got, []string{"u1", "u3"}) {
		t.Errorf("users %v", got)
	}
}

func TestErrors(t *testing.T) {
	cases := []struct {
		name      string
		key       string
		fault     *platformfake.Fault
		status    int
		retryable bool
		message   string
	}{
		{name: "wrong key", key: "b-rest-key-WRONG-000", status: 401, message: "Invalid API key: <redacted>"},
		{name: "403", key: apiKey, fault: &platformfake.Fault{Status: 403}, status: 403, message: "Forbidden: the API key lacks the users.track permission"},
		{name: "400 with the platform's message", key: apiKey, fault: &platformfake.Fault{Status: 400, Message: "attributes must be an array"}, status: 400, message: "attributes must be an array"},
		{name: "404", key: apiKey, fault: &platformfake.Fault{Status: 404}, status: 404, message: "Not Found"},
		{name: "500 is retryable", key: apiKey, fault: &platformfake.Fault{Status: 500}, status: 500, retryable: true, message: "Internal Server Error"},
		{name: "503 is retryable", key: apiKey, fault: &platformfake.Fault{Status: 503}, status: 503, retryable: true, message: "Service Unavailable"},
		{name: "the key echoed back is scrubbed", key: apiKey, fault: &platformfake.Fault{Status: 401, Message: "Invalid API key: " + apiKey}, status: 401, message: "Invalid API key: ***"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newFake(t, platformfake.BrazeOptions{})
			if tc.fault != nil {
				b.Inject(*tc.fault)
			}
			_, err := newAdapter(b, tc.key).Remove(ctx, members("u1"))
			var pe *platform.Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T), want *platform.Error", err, err)
			}
			want := platform.Error{Platform: "braze", Status: tc.status, Message: tc.message, Retryable: tc.retryable}
			if *pe != want {
				t.Errorf("error %+v, want %+v", *pe, want)
			}
			if strings.Contains(err.Error(), apiKey) || strings.Contains(err.Error(), tc.key) {
				t.Errorf("error %q carries a key", err)
			}
			if got := b.UsersWith(attr, false); len(got) != 0 {
				t.Errorf("a failed request changed users %v", got)
			}
		})
	}
}

// TestThrottledRequestIsWaitedOut: Braze answers 429 with X-RateLimit-Reset (no Retry-After);
// the adapter waits until the reset and succeeds.
func TestThrottledRequestIsWaitedOut(t *testing.T) {
	b := newFake(t, platformfake.BrazeOptions{})
	b.Inject(platformfake.Fault{Status: 429})
	start := time.Now()
	out, err := newAdapter(b, apiKey).Add(ctx, members("u1", "u2"))
	if err != nil {
		t.Fatal(err)
	}
	reqs := b.Requests()
	if len(reqs) != 2 || reqs[0].Status != 429 || reqs[1].Status != 201 {
		t.Fatalf("requests %d, want a 429 then a 201", len(reqs))
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %v for a reset at most 2s away", d)
	}
	if !slices.Equal(ids(out.Done), []string{"u1", "u2"}) || !slices.Equal(b.UsersWith(attr, true), []string{"u1", "u2"}) {
		t.Errorf("done %v users %v", out.Done, b.UsersWith(attr, true))
	}
}
