package talonone_test

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

	"github.com/cohort-dev/cohort/internal/connector/platform"
	"github.com/cohort-dev/cohort/internal/connector/platformfake"
	"github.com/cohort-dev/cohort/internal/connector/talonone"
)

const (
	apiKey   = "t1-integration-SECRET-a9b8c7"
	audience = int64(748)
)

var ctx = context.Background()

func newFake(t *testing.T, o platformfake.TalonOneOptions) *platformfake.TalonOne {
	t.Helper()
	if o.APIKey == "" {
		o.APIKey = apiKey
	}
	f := platformfake.NewTalonOne(o)
	t.Cleanup(f.Close)
	f.CreateAudience(audience)
	return f
}

func newAdapter(f *platformfake.TalonOne, key string, audienceID int64) *talonone.Adapter {
	return talonone.New(talonone.Config{BaseURL: f.URL() + "/", APIKey: key, AudienceID: audienceID}, &http.Client{Timeout: 10 * time.Second},
		platform.NewLimiters().Get)
}

func members(ids ...string) []platform.Member {
	out := make([]platform.Member, len(ids))
	for i, id := range ids {
		out[i] = platform.Member{UserID: id}
	}
	return out
}

func userIDs(ms []platform.Member) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.UserID)
	}
	return out
}

type item struct {
	Action               string `json:"action"`
	ProfileIntegrationID string `json:"profileIntegrationId"`
	AudienceID           int64  `json:"audienceId"`
}

// items decodes each request's items.
func items(t *testing.T, f *platformfake.TalonOne) [][]item {
	t.Helper()
	var out [][]item
	for _, r := range f.Requests() {
		if r.Method != http.MethodPost || r.Path != "/v2/customer_audiences" {
			t.Errorf("request %s %s", r.Method, r.Path)
		}
		var doc struct {
			Data []item `json:"data"`
		}
		if err := json.Unmarshal(r.Body, &doc); err != nil {
			t.Fatal(err)
		}
		out = append(out, doc.Data)
	}
	return out
}

func TestChunks(t *testing.T) {
	a := newAdapter(newFake(t, platformfake.TalonOneOptions{}), apiKey, audience)
	if a.AddChunk() != 1000 || a.RemoveChunk() != 1000 {
		t.Errorf("chunks %d/%d, want 1000/1000", a.AddChunk(), a.RemoveChunk())
	}
}

func TestAddAndRemove(t *testing.T) {
	f := newFake(t, platformfake.TalonOneOptions{})
	a := newAdapter(f, apiKey, audience)
	steps := []struct {
		name    string
		action  string
		members []string
		want    []string
	}{
		{"add", "add", []string{"u1", "u2", "u3"}, []string{"u1", "u2", "u3"}},
		{"delete", "delete", []string{"u2"}, []string{"u1", "u3"}},
		{"adding a member again is harmless", "add", []string{"u1", "u2"}, []string{"u1", "u2", "u3"}},
		{"deleting a non-member is harmless", "delete", []string{"u9"}, []string{"u1", "u2", "u3"}},
		{"a full chunk", "add", func() []string {
			var ids []string
			for i := range 1000 {
				ids = append(ids, fmt.Sprintf("bulk%04d", i))
			}
			return ids
		}(), nil},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			f.Reset()
			before := f.AudienceMembers(audience)
			var out platform.Outcome
			var err error
			if s.action == "add" {
				out, err = a.Add(ctx, members(s.members...))
			} else {
				out, err = a.Remove(ctx, members(s.members...))
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(userIDs(out.Done), s.members) || out.Skipped != 0 || out.Failed != 0 {
				t.Errorf("outcome done %d skipped %d failed %d, want all %d done", len(out.Done), out.Skipped, out.Failed, len(s.members))
			}
			want := s.want
			if want == nil {
				want = append(before, s.members...)
				slices.Sort(want)
			}
			if got := f.AudienceMembers(audience); !slices.Equal(got, want) {
				t.Errorf("audience %d members, want %d", len(got), len(want))
			}
			reqs := items(t, f)
			if len(reqs) != 1 || len(reqs[0]) != len(s.members) {
				t.Fatalf("%d requests, want one with %d items", len(reqs), len(s.members))
			}
			for i, it := range reqs[0] {
				if want := (item{Action: s.action, ProfileIntegrationID: s.members[i], AudienceID: audience}); it != want {
					t.Errorf("item %d: %+v, want %+v", i, it, want)
				}
			}
			r := f.Requests()[0]
			if r.Header.Get("Authorization") != "ApiKey-v1 "+apiKey || r.Header.Get("Content-Type") != "application/json" {
				t.Errorf("headers %v", r.Header)
			}
		})
	}
	if v := f.Violations(); len(v) > 0 {
		t.Errorf("violations: %v", v)
	}
}

func TestNothingToSendSendsNothing(t *testing.T) {
	f := newFake(t, platformfake.TalonOneOptions{})
	for _, op := range []func(context.Context, []platform.Member) (platform.Outcome, error){newAdapter(f, apiKey, audience).Add, newAdapter(f, apiKey, audience).Remove} {
		if out, err := op(ctx, nil); err != nil || len(out.Done) != 0 {
			t.Errorf("empty call: %+v %v", out, err)
		}
	}
	if n := f.RequestCount("", "/"); n != 0 {
		t.Errorf("%d requests for nothing", n)
	}
}

func TestErrors(t *testing.T) {
	cases := []struct {
		name      string
		key       string
		audience  int64
		fault     *platformfake.Fault
		status    int
		retryable bool
		message   string
	}{
		{name: "wrong key", key: "t1-integration-WRONG-000", audience: audience, status: 401, message: "unauthorized: missing or invalid API key"},
		{name: "unknown audience", key: apiKey, audience: 99, status: 404, message: "audience 99 not found: audience with id 99 does not exist"},
		{name: "403", key: apiKey, audience: audience, fault: &platformfake.Fault{Status: 403}, status: 403, message: "forbidden"},
		{name: "400 with the platform's message", key: apiKey, audience: audience, fault: &platformfake.Fault{Status: 400, Message: "profileIntegrationId too long"}, status: 400, message: "profileIntegrationId too long"},
		{name: "409 parallel requests", key: apiKey, audience: audience, fault: &platformfake.Fault{Status: 409}, status: 409, message: "too many requests: avoid parallel requests"},
		{name: "500 is retryable", key: apiKey, audience: audience, fault: &platformfake.Fault{Status: 500}, status: 500, retryable: true, message: "internal server error"},
		{name: "503 is retryable", key: apiKey, audience: audience, fault: &platformfake.Fault{Status: 503}, status: 503, retryable: true, message: "service unavailable"},
		{name: "the key echoed back is scrubbed", key: apiKey, audience: audience, fault: &platformfake.Fault{Status: 400, Message: "bad key " + apiKey}, status: 400, message: "bad key ***"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, platformfake.TalonOneOptions{})
			if tc.fault != nil {
				f.Inject(*tc.fault)
			}
			_, err := newAdapter(f, tc.key, tc.audience).Add(ctx, members("u1"))
			var pe *platform.Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T), want *platform.Error", err, err)
			}
			want := platform.Error{Platform: "talon_one", Status: tc.status, Message: tc.message, Retryable: tc.retryable}
			if *pe != want {
				t.Errorf("error %+v, want %+v", *pe, want)
			}
			if strings.Contains(err.Error(), apiKey) || strings.Contains(err.Error(), tc.key) {
				t.Errorf("error %q carries a key", err)
			}
			if got := f.AudienceMembers(audience); len(got) != 0 {
				t.Errorf("a failed request changed the audience: %v", got)
			}
		})
	}
}

// TestThrottledRequestIsWaitedOut: a 429 with Retry-After is waited out in place.
func TestThrottledRequestIsWaitedOut(t *testing.T) {
	f := newFake(t, platformfake.TalonOneOptions{})
	f.Inject(platformfake.Fault{Status: 429, RetryAfter: time.Second})
	start := time.Now()
	out, err := newAdapter(f, apiKey, audience).Add(ctx, members("u1", "u2"))
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Errorf("took %v, want the 1s Retry-After waited out", d)
	}
	reqs := f.Requests()
	if len(reqs) != 2 || reqs[0].Status != 429 || reqs[1].Status != 204 {
		t.Errorf("%d requests, want a 429 then a 204", len(reqs))
	}
	if len(out.Done) != 2 || !slices.Equal(f.AudienceMembers(audience), []string{"u1", "u2"}) {
		t.Errorf("done %v audience %v", out.Done, f.AudienceMembers(audience))
	}
}

// TestStaysUnderTheFakesRateLimit: back-to-back calls stay under a deployment limit of the
// adapter's own Burst per second.
func TestStaysUnderTheFakesRateLimit(t *testing.T) {
	f := newFake(t, platformfake.TalonOneOptions{PerSecond: talonone.LimitAudiences.Burst})
	a := newAdapter(f, apiKey, audience)
	n := talonone.LimitAudiences.Burst + 5
	for i := range n {
		if _, err := a.Add(ctx, members(fmt.Sprintf("u%d", i))); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if got := f.RequestCount("", "/"); got != n {
		t.Errorf("%d requests, want %d (none throttled)", got, n)
	}
	if v := f.Violations(); len(v) > 0 {
		t.Errorf("violations: %v", v)
	}
}
