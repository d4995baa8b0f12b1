package klaviyo_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/connector/klaviyo"
	"github.com/cohort-dev/cohort/internal/connector/platform"
	"github.com/cohort-dev/cohort/internal/connector/platformfake"
)

const (
	apiKey = "pk_live_K1aviy0SECRET42"
	listID = "Xy7Abc"
)

var ctx = context.Background()

func newFake(t *testing.T, o platformfake.KlaviyoOptions) *platformfake.Klaviyo {
	t.Helper()
	if o.APIKey == "" {
		o.APIKey = apiKey
	}
	k := platformfake.NewKlaviyo(o)
	t.Cleanup(k.Close)
	k.CreateList(listID)
	return k
}

func newAdapter(k *platformfake.Klaviyo, key, list string) *klaviyo.Adapter {
	return klaviyo.New(klaviyo.Config{BaseURL: k.URL() + "/", ListID: list, APIKey: key}, &http.Client{Timeout: 10 * time.Second},
		platform.NewLimiters().Get, klaviyo.Options{PollInterval: time.Millisecond, PollMax: 5 * time.Millisecond})
}

func member(user, email string) platform.Member { return platform.Member{UserID: user, Email: email} }

func userIDs(ms []platform.Member) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.UserID)
	}
	sort.Strings(out)
	return out
}

func noViolations(t *testing.T, k *platformfake.Klaviyo) {
	t.Helper()
	if v := k.Violations(); len(v) > 0 {
		t.Errorf("contract violations: %v", v)
	}
}

func TestChunks(t *testing.T) {
	a := newAdapter(newFake(t, platformfake.KlaviyoOptions{}), apiKey, listID)
	if a.AddChunk() != 10000 || a.RemoveChunk() != 1000 {
		t.Errorf("chunks %d/%d, want 10000 (import job) / 1000 (list delete)", a.AddChunk(), a.RemoveChunk())
	}
}

func TestAdd(t *testing.T) {
	cases := []struct {
		name        string
		members     []platform.Member
		jobDelay    time.Duration
		wantDone    []string
		wantSkipped int
		wantList    []string
		wantJobs    int
	}{
		{name: "valid e-mails are imported into the list",
			members:  []platform.Member{member("u1", "ann@example.com"), member("u2", "bob@example.com")},
			wantDone: []string{"u1", "u2"}, wantList: []string{"ann@example.com", "bob@example.com"}, wantJobs: 1},
		{name: "members without a usable e-mail are skipped",
			members: []platform.Member{member("u1", "ann@example.com"), member("u2", ""), member("u3", "not-an-email"),
				member("u4", "Carl <carl@example.com>"), member("u5", "has space@example.com")},
			wantDone: []string{"u1"}, wantSkipped: 4, wantList: []string{"ann@example.com"}, wantJobs: 1},
		{name: "nobody with an e-mail: no request",
			members:     []platform.Member{member("u1", ""), member("u2", "nope")},
			wantSkipped: 2, wantList: []string{}, wantJobs: 0},
		{name: "a slow job is polled until complete",
			members:  []platform.Member{member("u1", "ann@example.com")},
			jobDelay: 30 * time.Millisecond, wantDone: []string{"u1"}, wantList: []string{"ann@example.com"}, wantJobs: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := newFake(t, platformfake.KlaviyoOptions{JobDelay: tc.jobDelay})
			out, err := newAdapter(k, apiKey, listID).Add(ctx, tc.members)
			if err != nil {
				t.Fatal(err)
			}
			if got := userIDs(out.Done); !slices.Equal(got, append([]string{}, tc.wantDone...)) {
				t.Errorf("done %v, want %v", got, tc.wantDone)
			}
			if out.Skipped != tc.wantSkipped || out.Failed != 0 {
				t.Errorf("skipped %d failed %d, want %d and 0", out.Skipped, out.Failed, tc.wantSkipped)
			}
			if got := k.ListMembers(listID); !slices.Equal(got, tc.wantList) {
				t.Errorf("list %v, want %v", got, tc.wantList)
			}
			if k.Jobs() != tc.wantJobs {
				t.Errorf("%d import jobs, want %d", k.Jobs(), tc.wantJobs)
			}
			if tc.wantJobs > 0 {
				polls := k.JobPolls()
				if polls < 1 || (tc.jobDelay > 0 && polls < 2) {
					t.Errorf("%d polls (job delay %v)", polls, tc.jobDelay)
				}
				for _, r := range k.Requests() {
					if r.Header.Get("Authorization") != "Klaviyo-API-Key "+apiKey || r.Header.Get("revision") != klaviyo.Revision {
						t.Errorf("%s %s: Authorization %q revision %q", r.Method, r.Path, r.Header.Get("Authorization"), r.Header.Get("revision"))
					}
				}
			}
			noViolations(t, k)
		})
	}
}

// TestAddBody checks the import job document: the profiles' e-mails and external ids, and the list.
func TestAddBody(t *testing.T) {
	k := newFake(t, platformfake.KlaviyoOptions{})
	if _, err := newAdapter(k, apiKey, listID).Add(ctx, []platform.Member{member("u1", "ann@example.com"), member("u2", "")}); err != nil {
		t.Fatal(err)
	}
	var job struct {
		Data struct {
			Type       string `json:"type"`
			Attributes struct {
				Profiles struct {
					Data []struct {
						Type       string            `json:"type"`
						Attributes map[string]string `json:"attributes"`
					} `json:"data"`
				} `json:"profiles"`
			} `json:"attributes"`
			Relationships struct {
				Lists struct {
					Data []struct{ Type, ID string } `json:"data"`
				} `json:"lists"`
			} `json:"relationships"`
		} `json:"data"`
	}
	reqs := k.Requests()
	if len(reqs) < 2 || reqs[0].Method != http.MethodPost || reqs[0].Path != "/api/profile-bulk-import-jobs" {
		t.Fatalf("requests %v", reqs)
	}
	if err := json.Unmarshal(reqs[0].Body, &job); err != nil {
		t.Fatal(err)
	}
	d := job.Data
	if d.Type != "profile-bulk-import-job" || len(d.Attributes.Profiles.Data) != 1 ||
		d.Attributes.Profiles.Data[0].Type != "profile" ||
		!equalMaps(d.Attributes.Profiles.Data[0].Attributes, map[string]string{"email": "ann@example.com", "external_id": "u1"}) ||
		len(d.Relationships.Lists.Data) != 1 || d.Relationships.Lists.Data[0].ID != listID || d.Relationships.Lists.Data[0].Type != "list" {
		t.Errorf("import job %s", reqs[0].Body)
	}
	for _, r := range reqs[1:] {
		if r.Method != http.MethodGet || !strings.HasPrefix(r.Path, "/api/profile-bulk-import-jobs/") {
			t.Errorf("after the job: %s %s, want only polls", r.Method, r.Path)
		}
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// lookups returns the e-mails of every GET /api/profiles filter, request by request.
func lookups(t *testing.T, k *platformfake.Klaviyo) [][]string {
	t.Helper()
	var out [][]string
	for _, r := range k.Requests() {
		if r.Method != http.MethodGet || r.Path != "/api/profiles" {
			continue
		}
		q, err := url.ParseQuery(r.RawQuery)
		if err != nil {
			t.Fatal(err)
		}
		f := q.Get("filter")
		if !strings.HasPrefix(f, "any(email,[") || !strings.HasSuffix(f, "])") {
			t.Fatalf("filter %q", f)
		}
		var emails []string
		if err := json.Unmarshal([]byte(strings.TrimSuffix(strings.TrimPrefix(f, "any(email,"), ")")), &emails); err != nil {
			t.Fatalf("filter %q: %v", f, err)
		}
		out = append(out, emails)
	}
	return out
}

// deletedIDs returns the profile ids of every list relationship delete, request by request.
func deletedIDs(t *testing.T, k *platformfake.Klaviyo) [][]string {
	t.Helper()
	var out [][]string
	for _, r := range k.Requests() {
		if r.Method != http.MethodDelete {
			continue
		}
		if r.Path != "/api/lists/"+listID+"/relationships/profiles" {
			t.Errorf("DELETE %s", r.Path)
		}
		var doc struct {
			Data []struct{ Type, ID string } `json:"data"`
		}
		if err := json.Unmarshal(r.Body, &doc); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, d := range doc.Data {
			if d.Type != "profile" {
				t.Errorf("relationship type %q", d.Type)
			}
			ids = append(ids, d.ID)
		}
		out = append(out, ids)
	}
	return out
}

func TestRemove(t *testing.T) {
	k := newFake(t, platformfake.KlaviyoOptions{})
	a := newAdapter(k, apiKey, listID)
	emails := []string{"ann@example.com", "bob@example.com", "cat@example.com", "dan@example.com"}
	var seed []platform.Member
	for i, e := range emails {
		seed = append(seed, member(fmt.Sprintf("u%d", i+1), e))
	}
	if _, err := a.Add(ctx, seed); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name        string
		members     func() []platform.Member
		wantDone    map[string]string // user -> the profile id Done carries
		wantSkipped int
		wantLookups [][]string
		wantDeletes int
		wantList    []string
	}{
		{name: "unknown profile ids are looked up by e-mail, in one request",
			members:     func() []platform.Member { return []platform.Member{seed[0], seed[1]} },
			wantDone:    map[string]string{"u1": profileID(t, k, "ann@example.com"), "u2": profileID(t, k, "bob@example.com")},
			wantLookups: [][]string{{"ann@example.com", "bob@example.com"}}, wantDeletes: 1,
			wantList: []string{"cat@example.com", "dan@example.com"}},
		{name: "a known profile id needs no lookup",
			members: func() []platform.Member {
				return []platform.Member{{UserID: "u3", Email: "cat@example.com", PlatformID: profileID(t, k, "cat@example.com")}}
			},
			wantDone:    map[string]string{"u3": profileID(t, k, "cat@example.com")},
			wantDeletes: 1, wantList: []string{"dan@example.com"}},
		{name: "e-mails match whatever their case",
			members:     func() []platform.Member { return []platform.Member{member("u4", "DAN@Example.COM")} },
			wantDone:    map[string]string{"u4": profileID(t, k, "dan@example.com")},
			wantLookups: [][]string{{"DAN@Example.COM"}}, wantDeletes: 1, wantList: []string{}},
		{name: "no profile, no usable e-mail: skipped without a delete",
			members: func() []platform.Member {
				return []platform.Member{member("u8", "nobody@example.com"), member("u9", ""), member("u10", "bad")}
			},
			wantDone: map[string]string{}, wantSkipped: 3, wantLookups: [][]string{{"nobody@example.com"}}, wantDeletes: 0, wantList: []string{}},
		{name: "two members sharing an e-mail are looked up once",
			members: func() []platform.Member {
				return []platform.Member{member("u1", "ann@example.com"), member("u1-alt", "ann@example.com")}
			},
			wantDone:    map[string]string{"u1": profileID(t, k, "ann@example.com"), "u1-alt": profileID(t, k, "ann@example.com")},
			wantLookups: [][]string{{"ann@example.com"}}, wantDeletes: 1, wantList: []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			members := tc.members()
			k.Reset()
			out, err := a.Remove(ctx, members)
			if err != nil {
				t.Fatal(err)
			}
			done := map[string]string{}
			for _, m := range out.Done {
				done[m.UserID] = m.PlatformID
			}
			if !equalMaps(done, tc.wantDone) {
				t.Errorf("done %v, want %v", done, tc.wantDone)
			}
			if out.Skipped != tc.wantSkipped || out.Failed != 0 {
				t.Errorf("skipped %d failed %d, want %d", out.Skipped, out.Failed, tc.wantSkipped)
			}
			if got := lookups(t, k); fmt.Sprint(got) != fmt.Sprint(tc.wantLookups) {
				t.Errorf("lookups %v, want %v", got, tc.wantLookups)
			}
			if got := deletedIDs(t, k); len(got) != tc.wantDeletes {
				t.Errorf("%d deletes %v, want %d", len(got), got, tc.wantDeletes)
			}
			if got := k.ListMembers(listID); !slices.Equal(got, tc.wantList) {
				t.Errorf("list %v, want %v", got, tc.wantList)
			}
			noViolations(t, k)
		})
	}
}

func profileID(t *testing.T, k *platformfake.Klaviyo, email string) string {
	t.Helper()
	id, ok := k.ProfileID(email)
	if !ok {
		return "(no profile for " + email + ")"
	}
	return id
}

// TestRemoveLooksUpInPagesOf100: 250 unknown profile ids are three lookups (100, 100, 50) and
// one delete.
func TestRemoveLooksUpInPagesOf100(t *testing.T) {
	k := newFake(t, platformfake.KlaviyoOptions{})
	var ms []platform.Member
	for i := range 250 {
		e := fmt.Sprintf("user%03d@example.com", i)
		k.SeedProfile(e)
		ms = append(ms, member(fmt.Sprintf("u%03d", i), e))
	}
	out, err := newAdapter(k, apiKey, listID).Remove(ctx, ms)
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int
	for _, l := range lookups(t, k) {
		sizes = append(sizes, len(l))
	}
	if !slices.Equal(sizes, []int{100, 100, 50}) {
		t.Errorf("lookup sizes %v, want [100 100 50]", sizes)
	}
	if d := deletedIDs(t, k); len(d) != 1 || len(d[0]) != 250 {
		t.Errorf("deletes %d, want one of 250", len(d))
	}
	if len(out.Done) != 250 || out.Skipped != 0 {
		t.Errorf("done %d skipped %d", len(out.Done), out.Skipped)
	}
	for _, m := range out.Done {
		if id, _ := k.ProfileID(m.Email); m.PlatformID != id || id == "" {
			t.Fatalf("%s: platform id %q, want %q", m.UserID, m.PlatformID, id)
		}
	}
	noViolations(t, k)
}

func TestErrors(t *testing.T) {
	cases := []struct {
		name      string
		key       string
		list      string
		fault     *platformfake.Fault
		op        string // "add" or "remove"
		status    int
		retryable bool
		message   string
	}{
		{name: "wrong key", key: "pk_live_WRONGKEY_000", list: listID, op: "add", status: 401,
			message: "not_authenticated: Missing or invalid private key."},
		{name: "unknown list", key: apiKey, list: "NOPE", op: "add", status: 404,
			message: "not_found: A list with id NOPE does not exist."},
		{name: "unknown list on remove", key: apiKey, list: "NOPE", op: "remove", status: 404,
			message: "not_found: A list with id NOPE does not exist."},
		{name: "403", key: apiKey, list: listID, op: "add", fault: &platformfake.Fault{Status: 403}, status: 403,
			message: "permission_denied: You do not have permission to perform this action."},
		{name: "500 is retryable", key: apiKey, list: listID, op: "add", fault: &platformfake.Fault{Status: 500}, status: 500, retryable: true,
			message: "error: A server error occurred."},
		{name: "503 on the lookup is retryable", key: apiKey, list: listID, op: "remove",
			fault: &platformfake.Fault{Status: 503, PathPrefix: "/api/profiles"}, status: 503, retryable: true,
			message: "service_unavailable: Service temporarily unavailable, try again later."},
		{name: "500 on a job poll is retryable", key: apiKey, list: listID, op: "add",
			fault: &platformfake.Fault{Status: 500, PathPrefix: "/api/profile-bulk-import-jobs/"}, status: 500, retryable: true,
			message: "error: A server error occurred."},
		{name: "the key echoed back is scrubbed", key: apiKey, list: listID, op: "add",
			fault: &platformfake.Fault{Status: 400, Message: "Bad key " + apiKey + " for this account"}, status: 400,
			message: "invalid: Bad key *** for this account"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := newFake(t, platformfake.KlaviyoOptions{})
			if tc.fault != nil {
				k.Inject(*tc.fault)
			}
			a := newAdapter(k, tc.key, tc.list)
			var err error
			if tc.op == "add" {
				_, err = a.Add(ctx, []platform.Member{member("u1", "ann@example.com")})
			} else {
				_, err = a.Remove(ctx, []platform.Member{member("u1", "ann@example.com"), {UserID: "u2", Email: "b@example.com", PlatformID: "01JKNOWN"}})
			}
			var pe *platform.Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T), want *platform.Error", err, err)
			}
			want := platform.Error{Platform: "klaviyo", Status: tc.status, Message: tc.message, Retryable: tc.retryable}
			if *pe != want {
				t.Errorf("error %+v, want %+v", *pe, want)
			}
			if strings.Contains(err.Error(), apiKey) || strings.Contains(err.Error(), tc.key) {
				t.Errorf("error %q carries a key", err)
			}
		})
	}
}

// TestThrottledRequestIsWaitedOut: a 429 with Retry-After is waited out in place and the call
// succeeds.
func TestThrottledRequestIsWaitedOut(t *testing.T) {
	k := newFake(t, platformfake.KlaviyoOptions{})
	k.Inject(platformfake.Fault{Status: 429, RetryAfter: time.Second, PathPrefix: "/api/profile-bulk-import-jobs"})
	start := time.Now()
	out, err := newAdapter(k, apiKey, listID).Add(ctx, []platform.Member{member("u1", "ann@example.com")})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Errorf("took %v, want the 1s Retry-After waited out", d)
	}
	if len(out.Done) != 1 || !slices.Equal(k.ListMembers(listID), []string{"ann@example.com"}) {
		t.Errorf("done %v list %v", out.Done, k.ListMembers(listID))
	}
	if n := k.RequestCount(http.MethodPost, "/api/profile-bulk-import-jobs"); n != 2 || k.Jobs() != 1 {
		t.Errorf("%d job posts, %d jobs: want the throttled one and one that made the job", n, k.Jobs())
	}
}

// TestStaysUnderTheListsLimit: back-to-back removes never go over Klaviyo's 10/s on the lists
// endpoints (the fake answers 429 and records a violation when they do).
func TestStaysUnderTheListsLimit(t *testing.T) {
	k := newFake(t, platformfake.KlaviyoOptions{})
	a := newAdapter(k, apiKey, listID)
	for i := range 12 {
		if _, err := a.Remove(ctx, []platform.Member{{UserID: "u", Email: "a@example.com", PlatformID: fmt.Sprintf("01J%023d", i)}}); err != nil {
			t.Fatalf("remove %d: %v", i, err)
		}
	}
	if n := k.RequestCount(http.MethodDelete, "/"); n != 12 {
		t.Errorf("%d deletes, want 12 (none throttled)", n)
	}
	noViolations(t, k)
}
