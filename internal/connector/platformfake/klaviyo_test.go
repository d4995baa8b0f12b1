package platformfake

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

const kKey = "pk_test_123"

var kHeaders = []string{"Authorization: Klaviyo-API-Key " + kKey, "revision: 2024-10-15", "Content-Type: application/vnd.api+json", "Accept: application/vnd.api+json"}

func kProfile(email, externalID string) map[string]any {
	attrs := map[string]any{"external_id": externalID}
	if email != "" {
		attrs["email"] = email
	}
	return map[string]any{"type": "profile", "attributes": attrs}
}

func kJobBody(list string, profiles ...map[string]any) map[string]any {
	if profiles == nil {
		profiles = []map[string]any{}
	}
	data := map[string]any{
		"type":       "profile-bulk-import-job",
		"attributes": map[string]any{"profiles": map[string]any{"data": profiles}},
	}
	if list != "" {
		data["relationships"] = map[string]any{"lists": map[string]any{"data": []any{map[string]any{"type": "list", "id": list}}}}
	}
	return map[string]any{"data": data}
}

func kAuthHeaders(auth string) []string {
	out := []string{"revision: 2024-10-15", "Content-Type: application/vnd.api+json"}
	if auth != "" {
		out = append(out, "Authorization: "+auth)
	}
	return out
}

func TestKlaviyoAuth(t *testing.T) {
	k := NewKlaviyo(KlaviyoOptions{APIKey: kKey})
	defer k.Close()
	for _, tc := range []struct {
		name      string
		auth      string
		status    int
		violation bool
	}{
		{"missing header", "", 401, true},
		{"wrong scheme", "Bearer " + kKey, 401, true},
		{"no key", "Klaviyo-API-Key", 401, true},
		{"wrong key", "Klaviyo-API-Key pk_other", 401, false},
		{"right key", "Klaviyo-API-Key " + kKey, 200, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(k.Violations())
			a := send(t, "GET", k.URL()+"/api/profiles", nil, kAuthHeaders(tc.auth)...)
			if a.status != tc.status {
				t.Fatalf("status %d, want %d: %s", a.status, tc.status, a.body)
			}
			n := 0
			if tc.violation {
				n = 1
			}
			expectViolations(t, k.Violations(), before, n, "Authorization")
			if a.status == 401 {
				doc := a.json(t)
				if got := path(t, doc, "errors", 0, "status"); got != float64(401) {
					t.Errorf("errors[0].status = %v (%T), want the number 401", got, got)
				}
				if got := path(t, doc, "errors", 0, "code"); got != "not_authenticated" {
					t.Errorf("code %v", got)
				}
				if strings.Contains(string(a.body), "pk_other") {
					t.Errorf("error echoes the key: %s", a.body)
				}
			}
		})
	}
}

func TestKlaviyoRevisionAndContentType(t *testing.T) {
	k := NewKlaviyo(KlaviyoOptions{APIKey: kKey})
	defer k.Close()
	k.CreateList("L")
	body := mustJSON(t, kJobBody("L", kProfile("a@x.com", "u1")))
	auth := "Authorization: Klaviyo-API-Key " + kKey
	for _, tc := range []struct {
		name    string
		headers []string
		status  int
		want    string
	}{
		{"missing revision", []string{auth, "Content-Type: application/vnd.api+json"}, 400, "revision"},
		{"bad revision", []string{auth, "revision: 2024/10/15", "Content-Type: application/vnd.api+json"}, 400, "revision"},
		{"bad content type", []string{auth, "revision: 2024-10-15", "Content-Type: text/plain"}, 415, "Content-Type"},
		{"json accepted", []string{auth, "revision: 2024-10-15", "Content-Type: application/json; charset=utf-8"}, 202, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(k.Violations())
			a := send(t, "POST", k.URL()+"/api/profile-bulk-import-jobs", body, tc.headers...)
			if a.status != tc.status {
				t.Fatalf("status %d, want %d: %s", a.status, tc.status, a.body)
			}
			n := 1
			if tc.want == "" {
				n = 0
			}
			expectViolations(t, k.Violations(), before, n, tc.want)
		})
	}
	if k.Jobs() != 1 {
		t.Errorf("Jobs() = %d, want 1 (only the accepted request)", k.Jobs())
	}
}

func TestKlaviyoJobLifecycle(t *testing.T) {
	clk := newClock()
	k := NewKlaviyo(KlaviyoOptions{APIKey: kKey, JobDelay: 10 * time.Second, Now: clk.Now})
	defer k.Close()
	k.CreateList("LIST1")
	seeded := k.SeedProfile("Carol@X.com")

	a := send(t, "POST", k.URL()+"/api/profile-bulk-import-jobs", mustJSON(t, kJobBody("LIST1",
		kProfile("a@x.com", "u1"), kProfile("b@x.com", "u2"), kProfile("", "u3"), kProfile("carol@x.com", "u4"), kProfile("not-an-email", "u5"),
	)), kHeaders...)
	if a.status != 202 {
		t.Fatalf("create: %d %s", a.status, a.body)
	}
	doc := a.json(t)
	id, _ := path(t, doc, "data", "id").(string)
	if id == "" || path(t, doc, "data", "type") != "profile-bulk-import-job" {
		t.Fatalf("bad job doc: %s", a.body)
	}
	if got := path(t, doc, "data", "attributes", "status"); got != "queued" {
		t.Errorf("status %v, want queued", got)
	}
	if got := path(t, doc, "data", "attributes", "total_count"); got != float64(5) {
		t.Errorf("total_count %v", got)
	}
	if got := path(t, doc, "data", "attributes", "completed_at"); got != nil {
		t.Errorf("completed_at %v, want null", got)
	}
	if got := path(t, doc, "data", "relationships", "lists", "data", 0, "id"); got != "LIST1" {
		t.Errorf("relationship list %v", got)
	}
	if got := path(t, doc, "data", "links", "self"); !strings.Contains(got.(string), id) {
		t.Errorf("links.self %v", got)
	}
	if len(k.ListMembers("LIST1")) != 0 {
		t.Fatalf("job applied before it completed")
	}

	poll := func() map[string]any {
		a := send(t, "GET", k.URL()+"/api/profile-bulk-import-jobs/"+id, nil, kHeaders[:2]...)
		if a.status != 200 {
			t.Fatalf("poll: %d %s", a.status, a.body)
		}
		return a.json(t)
	}
	if got := path(t, poll(), "data", "attributes", "status"); got != "processing" {
		t.Errorf("status before the delay %v, want processing", got)
	}
	clk.Advance(10 * time.Second)
	if len(k.ListMembers("LIST1")) != 0 {
		t.Fatalf("job applied without a poll")
	}
	done := poll()
	attrs := path(t, done, "data", "attributes").(map[string]any)
	if attrs["status"] != "complete" || attrs["completed_count"] != float64(3) || attrs["failed_count"] != float64(2) || attrs["completed_at"] == nil {
		t.Errorf("after the delay: %v", attrs)
	}
	if got := k.ListMembers("LIST1"); fmt.Sprint(got) != "[Carol@X.com a@x.com b@x.com]" {
		t.Errorf("ListMembers = %q", got)
	}
	if id, ok := k.ProfileID("CAROL@x.com"); !ok || id != seeded {
		t.Errorf("seeded profile not reused: %q %v, want %q", id, ok, seeded)
	}
	aID, ok := k.ProfileID("a@x.com")
	if !ok || len(aID) != 26 || !strings.HasPrefix(aID, "01J") {
		t.Errorf("profile id %q", aID)
	}
	if got := path(t, poll(), "data", "attributes", "status"); got != "complete" {
		t.Errorf("status stays complete, got %v", got)
	}
	if k.Jobs() != 1 || k.JobPolls() != 3 {
		t.Errorf("Jobs %d JobPolls %d", k.Jobs(), k.JobPolls())
	}
	if a := send(t, "GET", k.URL()+"/api/profile-bulk-import-jobs/nope", nil, kHeaders[:2]...); a.status != 404 {
		t.Errorf("unknown job: %d", a.status)
	}
	if len(k.Violations()) != 0 {
		t.Errorf("violations: %q", k.Violations())
	}
}

func TestKlaviyoJobNoDelayCompletesOnFirstPoll(t *testing.T) {
	k := NewKlaviyo(KlaviyoOptions{APIKey: kKey})
	defer k.Close()
	k.CreateList("L")
	a := send(t, "POST", k.URL()+"/api/profile-bulk-import-jobs", mustJSON(t, kJobBody("L", kProfile("a@x.com", "u1"))), kHeaders...)
	id := path(t, a.json(t), "data", "id").(string)
	p := send(t, "GET", k.URL()+"/api/profile-bulk-import-jobs/"+id+"/", nil, kHeaders[:2]...)
	if got := path(t, p.json(t), "data", "attributes", "status"); got != "complete" {
		t.Fatalf("status %v", got)
	}
	if got := k.ListMembers("L"); len(got) != 1 {
		t.Fatalf("members %q", got)
	}
}

func TestKlaviyoImportValidation(t *testing.T) {
	k := NewKlaviyo(KlaviyoOptions{APIKey: kKey, NoRateLimit: true})
	defer k.Close()
	k.CreateList("L")
	many := make([]map[string]any, KlaviyoMaxImportProfiles+1)
	for i := range many {
		many[i] = kProfile(fmt.Sprintf("u%d@x.com", i), strconv.Itoa(i))
	}
	big := make([]map[string]any, 2000)
	for i := range big {
		p := kProfile(fmt.Sprintf("u%d@x.com", i), strconv.Itoa(i))
		p["attributes"].(map[string]any)["properties"] = map[string]any{"pad": strings.Repeat("x", 2600)}
		big[i] = p
	}
	for _, tc := range []struct {
		name      string
		body      any
		status    int
		violation string // "" for none
	}{
		{"not json", "{", 400, "JSON"},
		{"unknown top-level key", map[string]any{"data": kJobBody("L", kProfile("a@x.com", "u1"))["data"], "meta": map[string]any{}}, 400, "unknown key"},
		{"wrong type", map[string]any{"data": map[string]any{"type": "profile-import", "attributes": map[string]any{"profiles": map[string]any{"data": []any{kProfile("a@x.com", "u")}}}}}, 400, "type"},
		{"profiles not an object", map[string]any{"data": map[string]any{"type": "profile-bulk-import-job", "attributes": map[string]any{"profiles": []any{kProfile("a@x.com", "u")}}}}, 400, "must be an object"},
		{"email a number", kJobBody("L", map[string]any{"type": "profile", "attributes": map[string]any{"email": 5}}), 400, "email"},
		{"unknown profile attribute", kJobBody("L", map[string]any{"type": "profile", "attributes": map[string]any{"emial": "a@x.com"}}), 400, "emial"},
		{"profile type wrong", kJobBody("L", map[string]any{"type": "profiles", "attributes": map[string]any{"email": "a@x.com"}}), 400, "type"},
		{"no profiles", kJobBody("L"), 400, "at least one"},
		{"too many profiles", kJobBody("L", many...), 400, "10000"},
		{"list type wrong", map[string]any{"data": map[string]any{"type": "profile-bulk-import-job", "attributes": map[string]any{"profiles": map[string]any{"data": []any{kProfile("a@x.com", "u")}}}, "relationships": map[string]any{"lists": map[string]any{"data": []any{map[string]any{"type": "segment", "id": "L"}}}}}}, 400, "type"},
		{"payload over 5 MB", kJobBody("L", big...), 413, "bytes"},
		{"unknown list", kJobBody("NOPE", kProfile("a@x.com", "u1")), 404, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body []byte
			if s, ok := tc.body.(string); ok {
				body = []byte(s)
			} else {
				body = mustJSON(t, tc.body)
			}
			before := len(k.Violations())
			a := send(t, "POST", k.URL()+"/api/profile-bulk-import-jobs", body, kHeaders...)
			if a.status != tc.status {
				t.Fatalf("status %d, want %d: %.300s", a.status, tc.status, a.body)
			}
			if got := path(t, a.json(t), "errors", 0, "status"); got != float64(tc.status) {
				t.Errorf("error status %v", got)
			}
			n := 1
			if tc.violation == "" {
				n = 0
			}
			expectViolations(t, k.Violations(), before, n, tc.violation)
		})
	}
	if k.Jobs() != 0 {
		t.Errorf("rejected requests created %d jobs", k.Jobs())
	}
}

func kGetProfiles(t *testing.T, k *Klaviyo, q url.Values) answer {
	t.Helper()
	return send(t, "GET", k.URL()+"/api/profiles?"+q.Encode(), nil, kHeaders[:2]...)
}

func TestKlaviyoProfilesFilter(t *testing.T) {
	k := NewKlaviyo(KlaviyoOptions{APIKey: kKey})
	defer k.Close()
	idA := k.SeedProfile("a@x.com")
	idB := k.SeedProfile("b@x.com")
	weird := `we"i\rd,]@x.com`
	idW := k.SeedProfile(weird)

	emailsOf := func(a answer) []string {
		t.Helper()
		if a.status != 200 {
			t.Fatalf("status %d: %s", a.status, a.body)
		}
		var out []string
		for _, p := range path(t, a.json(t), "data").([]any) {
			out = append(out, path(t, p, "id").(string)+"="+path(t, p, "attributes", "email").(string))
		}
		return out
	}
	q := url.Values{}
	q.Set("filter", `any(email,["a@x.com", "B@X.com","nobody@x.com"])`)
	q.Set("page[size]", "100")
	q.Set("fields[profile]", "email")
	if got, want := fmt.Sprint(emailsOf(kGetProfiles(t, k, q))), fmt.Sprint([]string{idA + "=a@x.com", idB + "=b@x.com"}); got != want {
		t.Errorf("any: %s, want %s", got, want)
	}
	q.Set("filter", "equals(email,"+strconv.Quote(weird)+")")
	if got := emailsOf(kGetProfiles(t, k, q)); len(got) != 1 || got[0] != idW+"="+weird {
		t.Errorf("equals with escapes: %q", got)
	}
	q.Set("filter", `any(email,['b@x.com'])`)
	if got := emailsOf(kGetProfiles(t, k, q)); len(got) != 1 {
		t.Errorf("single quotes: %q", got)
	}

	// Pagination.
	q = url.Values{"page[size]": {"2"}}
	a := kGetProfiles(t, k, q)
	if got := emailsOf(a); len(got) != 2 {
		t.Fatalf("page 1: %q", got)
	}
	next, _ := path(t, a.json(t), "links", "next").(string)
	if next == "" {
		t.Fatalf("no next link: %s", a.body)
	}
	a = send(t, "GET", next, nil, kHeaders[:2]...)
	if got := emailsOf(a); len(got) != 1 || path(t, a.json(t), "links", "next") != nil {
		t.Fatalf("page 2: %q %s", got, a.body)
	}

	tooMany := make([]string, 101)
	for i := range tooMany {
		tooMany[i] = strconv.Quote(fmt.Sprintf("u%d@x.com", i))
	}
	for _, tc := range []struct {
		name, filter, size, extra string
		want                      string
	}{
		{"101 values", "any(email,[" + strings.Join(tooMany, ",") + "])", "100", "", "101 values"},
		{"page size 101", `equals(email,"a@x.com")`, "101", "", "page[size]"},
		{"page size 0", `equals(email,"a@x.com")`, "0", "", "page[size]"},
		{"unterminated string", `equals(email,"a@x.com)`, "", "", "unterminated"},
		{"unquoted value", `equals(email,a@x.com)`, "", "", "quoted"},
		{"equals with list", `equals(email,["a@x.com"])`, "", "", "one value"},
		{"any without list", `any(email,"a@x.com")`, "", "", "list"},
		{"unsupported operator", `contains(email,"a")`, "", "", "operator"},
		{"unknown field", `equals(emails,"a@x.com")`, "", "", "emails"},
		{"trailing garbage", `equals(email,"a@x.com"))`, "", "", "expected"},
		{"unknown parameter", `equals(email,"a@x.com")`, "", "page[number]", "page[number]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := url.Values{"filter": {tc.filter}}
			if tc.size != "" {
				q.Set("page[size]", tc.size)
			}
			if tc.extra != "" {
				q.Set(tc.extra, "1")
			}
			before := len(k.Violations())
			a := kGetProfiles(t, k, q)
			if a.status != 400 {
				t.Fatalf("status %d: %s", a.status, a.body)
			}
			expectViolations(t, k.Violations(), before, 1, tc.want)
		})
	}
}

func TestKlaviyoRemoveFromList(t *testing.T) {
	k := NewKlaviyo(KlaviyoOptions{APIKey: kKey})
	defer k.Close()
	k.CreateList("L")
	a := send(t, "POST", k.URL()+"/api/profile-bulk-import-jobs", mustJSON(t, kJobBody("L", kProfile("a@x.com", "1"), kProfile("b@x.com", "2"), kProfile("c@x.com", "3"))), kHeaders...)
	id := path(t, a.json(t), "data", "id").(string)
	send(t, "GET", k.URL()+"/api/profile-bulk-import-jobs/"+id, nil, kHeaders[:2]...)
	idA, _ := k.ProfileID("a@x.com")
	idC, _ := k.ProfileID("c@x.com")
	del := func(list string, ids ...string) answer {
		data := make([]any, len(ids))
		for i, id := range ids {
			data[i] = map[string]any{"type": "profile", "id": id}
		}
		return send(t, "DELETE", k.URL()+"/api/lists/"+list+"/relationships/profiles", mustJSON(t, map[string]any{"data": data}), kHeaders...)
	}
	if a := del("L", idA, "01JUNKNOWNPROFILE000000000", idC); a.status != 204 || len(a.body) != 0 {
		t.Fatalf("delete: %d %s", a.status, a.body)
	}
	if got := k.ListMembers("L"); fmt.Sprint(got) != "[b@x.com]" {
		t.Errorf("after delete: %q", got)
	}
	if a := del("L", idA); a.status != 204 {
		t.Errorf("repeat delete: %d", a.status)
	}
	if a := del("NOPE", idA); a.status != 404 {
		t.Errorf("unknown list: %d", a.status)
	}
	if len(k.Violations()) != 0 {
		t.Fatalf("violations: %q", k.Violations())
	}

	tooMany := make([]string, KlaviyoMaxListDelete+1)
	for i := range tooMany {
		tooMany[i] = fmt.Sprintf("id%d", i)
	}
	for _, tc := range []struct {
		name string
		body string
		want string
	}{
		{"over 1000 ids", string(mustJSON(t, map[string]any{"data": func() []any {
			out := []any{}
			for _, id := range tooMany {
				out = append(out, map[string]any{"type": "profile", "id": id})
			}
			return out
		}()})), "1001"},
		{"wrong type", `{"data":[{"type":"list","id":"x"}]}`, "type"},
		{"id a number", `{"data":[{"type":"profile","id":5}]}`, "string"},
		{"extra key", `{"data":[{"type":"profile","id":"x","attributes":{}}]}`, "unknown key"},
		{"data an object", `{"data":{"type":"profile","id":"x"}}`, "array"},
		{"empty", `{"data":[]}`, "at least one"},
		{"no body", ``, "empty body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(k.Violations())
			a := send(t, "DELETE", k.URL()+"/api/lists/L/relationships/profiles", []byte(tc.body), kHeaders...)
			if a.status != 400 {
				t.Fatalf("status %d: %s", a.status, a.body)
			}
			expectViolations(t, k.Violations(), before, 1, tc.want)
		})
	}
	if got := k.ListMembers("L"); fmt.Sprint(got) != "[b@x.com]" {
		t.Errorf("rejected deletes changed the list: %q", got)
	}
}

func TestKlaviyoRateLimitSlidingWindows(t *testing.T) {
	clk := newClock()
	k := NewKlaviyo(KlaviyoOptions{APIKey: kKey, Now: clk.Now, ImportJobsLimit: KlaviyoLimit{Burst: 2, Steady: 3}})
	defer k.Close()
	get := func() answer {
		return send(t, "GET", k.URL()+"/api/profile-bulk-import-jobs/x", nil, kHeaders[:2]...)
	}
	// Two in the same instant fit the burst of 2.
	for i := 0; i < 2; i++ {
		if a := get(); a.status != 404 {
			t.Fatalf("request %d: %d", i, a.status)
		}
	}
	a := get() // a third in the same instant is over the burst
	if a.status != 429 || a.header.Get("Retry-After") != "1" {
		t.Fatalf("over burst: %d Retry-After %q", a.status, a.header.Get("Retry-After"))
	}
	doc := a.json(t)
	if path(t, doc, "errors", 0, "code") != "throttled" || path(t, doc, "errors", 0, "status") != float64(429) {
		t.Errorf("429 body: %s", a.body)
	}
	if v := k.Violations(); len(v) != 1 || !strings.Contains(v[0], "rate limit") {
		t.Fatalf("violations: %q", v)
	}
	// The window slides: a second later the burst has room; the steady window (3) is then full.
	clk.Advance(time.Second)
	a = get()
	if a.status != 404 || a.header.Get("RateLimit-Limit") != "3" || a.header.Get("RateLimit-Remaining") != "0" {
		t.Fatalf("after a second: %d %v", a.status, a.header)
	}
	clk.Advance(time.Second)
	a = get()
	if a.status != 429 || a.header.Get("Retry-After") != "58" {
		t.Fatalf("over steady: %d Retry-After %q", a.status, a.header.Get("Retry-After"))
	}
	// Other endpoint groups have their own windows.
	if a := send(t, "GET", k.URL()+"/api/profiles", nil, kHeaders[:2]...); a.status != 200 || a.header.Get("RateLimit-Limit") != "700" || a.header.Get("RateLimit-Remaining") != "699" {
		t.Errorf("profiles group: %d %v", a.status, a.header)
	}
	clk.Advance(58 * time.Second)
	if a := get(); a.status != 404 {
		t.Fatalf("after the steady window slid: %d", a.status)
	}
	if got := len(k.Violations()); got != 2 {
		t.Errorf("violations %d, want 2: %q", got, k.Violations())
	}
}

func TestKlaviyoFaults(t *testing.T) {
	k := NewKlaviyo(KlaviyoOptions{APIKey: kKey})
	defer k.Close()
	k.CreateList("L")
	body := mustJSON(t, kJobBody("L", kProfile("a@x.com", "u1")))
	post := func() answer {
		return send(t, "POST", k.URL()+"/api/profile-bulk-import-jobs", body, kHeaders...)
	}

	k.Inject(Fault{Status: 429, RetryAfter: 2500 * time.Millisecond, PathPrefix: "/api/profile-bulk-import-jobs"})
	a := post()
	if a.status != 429 || a.header.Get("Retry-After") != "3" {
		t.Fatalf("fault 429: %d Retry-After %q", a.status, a.header.Get("Retry-After"))
	}
	if d := path(t, a.json(t), "errors", 0, "detail"); d != "Request was throttled. Expected available in 3 seconds." {
		t.Errorf("detail %q", d)
	}
	if k.Jobs() != 0 {
		t.Fatalf("faulted request created a job")
	}

	k.Inject(Fault{Status: 503, Count: 2})
	k.Inject(Fault{Status: 500, Count: 1, PathPrefix: "/api/profiles", Message: "boom"})
	for i := 0; i < 2; i++ {
		if a := post(); a.status != 503 || path(t, a.json(t), "errors", 0, "status") != float64(503) {
			t.Fatalf("503 #%d: %d", i, a.status)
		}
	}
	if a := post(); a.status != 202 {
		t.Fatalf("after the 503s: %d", a.status)
	}
	if a := send(t, "GET", k.URL()+"/api/profiles", nil, kHeaders[:2]...); a.status != 500 || path(t, a.json(t), "errors", 0, "detail") != "boom" {
		t.Fatalf("500 with message: %d %s", a.status, a.body)
	}

	k.Inject(Fault{Status: 401, Count: -1})
	for i := 0; i < 3; i++ {
		if a := post(); a.status != 401 || path(t, a.json(t), "errors", 0, "code") != "not_authenticated" {
			t.Fatalf("401 #%d: %d", i, a.status)
		}
	}
	k.ClearFaults()
	if a := post(); a.status != 202 {
		t.Fatalf("after ClearFaults: %d", a.status)
	}
	if k.Jobs() != 2 {
		t.Errorf("Jobs %d, want 2", k.Jobs())
	}
	if len(k.Violations()) != 0 {
		t.Errorf("faults recorded violations: %q", k.Violations())
	}
}

func TestKlaviyoRequestLog(t *testing.T) {
	k := NewKlaviyo(KlaviyoOptions{APIKey: kKey})
	defer k.Close()
	k.CreateList("L")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	plain := mustJSON(t, kJobBody("L", kProfile("a@x.com", "u1")))
	zw.Write(plain)
	zw.Close()
	a := send(t, "POST", k.URL()+"/api/profile-bulk-import-jobs", gz.Bytes(), append(kHeaders, "Content-Encoding: gzip")...)
	if a.status != 202 {
		t.Fatalf("gzip post: %d %s", a.status, a.body)
	}
	send(t, "GET", k.URL()+"/api/profiles?page%5Bsize%5D=5", nil, kHeaders[:2]...)
	reqs := k.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	if r := reqs[0]; r.Method != "POST" || r.Path != "/api/profile-bulk-import-jobs" || r.Status != 202 || !bytes.Equal(r.Body, plain) || r.Header.Get("revision") != "2024-10-15" || r.At.IsZero() {
		t.Errorf("first request: %+v", r)
	}
	if r := reqs[1]; r.Method != "GET" || r.RawQuery != "page%5Bsize%5D=5" || r.Status != 200 {
		t.Errorf("second request: %+v", r)
	}
	if n := k.RequestCount("POST", "/api/profile-bulk"); n != 1 {
		t.Errorf("RequestCount POST %d", n)
	}
	if n := k.RequestCount("", "/api/"); n != 2 {
		t.Errorf("RequestCount any %d", n)
	}
	reqs[0].Header.Set("revision", "changed")
	if k.Requests()[0].Header.Get("revision") != "2024-10-15" {
		t.Errorf("Requests is not a copy")
	}
	k.Reset()
	if len(k.Requests()) != 0 || k.Jobs() != 1 {
		t.Errorf("Reset: %d requests, %d jobs", len(k.Requests()), k.Jobs())
	}
	if a := send(t, "PATCH", k.URL()+"/api/profiles", nil, kHeaders[:2]...); a.status != 405 {
		t.Errorf("wrong method: %d", a.status)
	}
	if a := send(t, "GET", k.URL()+"/api/segments", nil, kHeaders[:2]...); a.status != 404 {
		t.Errorf("unknown path: %d", a.status)
	}
}
