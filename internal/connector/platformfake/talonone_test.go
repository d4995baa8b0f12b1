package platformfake

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

const tKey = "talon-key-123"

var tHeaders = []string{"Authorization: ApiKey-v1 " + tKey, "Content-Type: application/json"}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

func tItems(action string, audience int64, profiles ...string) []any {
	out := make([]any, len(profiles))
	for i, p := range profiles {
		out[i] = map[string]any{"action": action, "profileIntegrationId": p, "audienceId": audience}
	}
	return out
}

func tBody(items ...[]any) []byte {
	all := []any{}
	for _, it := range items {
		all = append(all, it...)
	}
	return []byte(must(map[string]any{"data": all}))
}

func TestTalonOneAuth(t *testing.T) {
	f := NewTalonOne(TalonOneOptions{APIKey: tKey})
	defer f.Close()
	f.CreateAudience(748)
	body := tBody(tItems("add", 748, "u1"))
	for _, tc := range []struct {
		name      string
		auth      string
		status    int
		violation bool
	}{
		{"missing header", "", 401, true},
		{"bearer", "Bearer " + tKey, 401, true},
		{"wrong key", "ApiKey-v1 nope", 401, false},
		{"right key", "ApiKey-v1 " + tKey, 204, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := []string{"Content-Type: application/json"}
			if tc.auth != "" {
				h = append(h, "Authorization: "+tc.auth)
			}
			before := len(f.Violations())
			a := send(t, "POST", f.URL()+"/v2/customer_audiences", body, h...)
			if a.status != tc.status {
				t.Fatalf("status %d, want %d: %s", a.status, tc.status, a.body)
			}
			n := 0
			if tc.violation {
				n = 1
			}
			expectViolations(t, f.Violations(), before, n, "Authorization")
			if a.status == 401 {
				doc := a.json(t)
				if doc["message"] != "unauthorized" || doc["StatusCode"] != float64(401) {
					t.Errorf("401 body %s", a.body)
				}
			}
		})
	}
}

func TestTalonOneAddDelete(t *testing.T) {
	f := NewTalonOne(TalonOneOptions{APIKey: tKey})
	defer f.Close()
	f.CreateAudience(748)
	f.CreateAudience(9)
	a := send(t, "POST", f.URL()+"/v2/customer_audiences", tBody(tItems("add", 748, "u1", "u2", "u3"), tItems("add", 9, "u1")), tHeaders...)
	if a.status != 204 || len(a.body) != 0 {
		t.Fatalf("add: %d %s", a.status, a.body)
	}
	a = send(t, "POST", f.URL()+"/v2/customer_audiences", tBody(tItems("delete", 748, "u2", "never-added"), tItems("add", 748, "u3")), tHeaders...)
	if a.status != 204 {
		t.Fatalf("delete: %d %s", a.status, a.body)
	}
	if got := f.AudienceMembers(748); fmt.Sprint(got) != "[u1 u3]" {
		t.Errorf("audience 748: %q", got)
	}
	if got := f.AudienceMembers(9); fmt.Sprint(got) != "[u1]" {
		t.Errorf("audience 9: %q", got)
	}
	// An unknown audience rejects the whole request.
	a = send(t, "POST", f.URL()+"/v2/customer_audiences", tBody(tItems("delete", 748, "u1"), tItems("add", 1234, "u9")), tHeaders...)
	if a.status != 404 || !strings.Contains(a.json(t)["message"].(string), "1234") || a.json(t)["StatusCode"] != float64(404) {
		t.Errorf("unknown audience: %d %s", a.status, a.body)
	}
	if got := f.AudienceMembers(748); fmt.Sprint(got) != "[u1 u3]" {
		t.Errorf("rejected request changed state: %q", got)
	}
	if len(f.Violations()) != 0 {
		t.Errorf("violations %q", f.Violations())
	}
}

func TestTalonOneValidation(t *testing.T) {
	f := NewTalonOne(TalonOneOptions{APIKey: tKey})
	defer f.Close()
	f.CreateAudience(748)
	many := tItems("add", 748, make([]string, TalonOneMaxItems+1)...)
	for i := range many {
		many[i].(map[string]any)["profileIntegrationId"] = fmt.Sprintf("u%d", i)
	}
	for _, tc := range []struct {
		name, body, pointer, want string
	}{
		{"bad action", `{"data":[{"action":"remove","profileIntegrationId":"u1","audienceId":748}]}`, "/data/0/action", "remove"},
		{"empty profile id", `{"data":[{"action":"add","profileIntegrationId":"","audienceId":748}]}`, "/data/0/profileIntegrationId", "empty"},
		{"profile id a number", `{"data":[{"action":"add","profileIntegrationId":7,"audienceId":748}]}`, "/data/0/profileIntegrationId", "string"},
		{"audience id a string", `{"data":[{"action":"add","profileIntegrationId":"u1","audienceId":"748"}]}`, "/data/0/audienceId", "integer"},
		{"audience id fractional", `{"data":[{"action":"add","profileIntegrationId":"u1","audienceId":748.5}]}`, "/data/0/audienceId", "integer"},
		{"missing audience id", `{"data":[{"action":"add","profileIntegrationId":"u1"}]}`, "/data/0/audienceId", "required"},
		{"unknown item key", `{"data":[{"action":"add","profileIntegrationId":"u1","audienceId":748,"integrationId":"x"}]}`, "/data/0", "integrationId"},
		{"unknown top-level key", `{"data":[],"items":[]}`, "", "items"},
		{"data an object", `{"data":{"action":"add"}}`, "/data", "array"},
		{"missing data", `{}`, "/data", "required"},
		{"1001 items", string(tBody(many)), "/data", "1001"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(f.Violations())
			a := send(t, "POST", f.URL()+"/v2/customer_audiences", []byte(tc.body), tHeaders...)
			if a.status != 400 {
				t.Fatalf("status %d: %s", a.status, a.body)
			}
			doc := a.json(t)
			if doc["StatusCode"] != float64(400) || path(t, doc, "errors", 0, "source", "pointer") != tc.pointer || path(t, doc, "errors", 0, "title") == nil {
				t.Errorf("error body %s", a.body)
			}
			expectViolations(t, f.Violations(), before, 1, tc.want)
		})
	}
	if got := f.AudienceMembers(748); len(got) != 0 {
		t.Errorf("rejected requests changed state: %q", got)
	}
	before := len(f.Violations())
	if a := send(t, "POST", f.URL()+"/v2/customer_audiences", tBody(tItems("add", 748, "u1")), "Authorization: ApiKey-v1 "+tKey, "Content-Type: text/plain"); a.status != 400 {
		t.Errorf("text/plain: %d", a.status)
	}
	expectViolations(t, f.Violations(), before, 1, "Content-Type")
	if a := send(t, "POST", f.URL()+"/v1/customer_audiences", tBody(tItems("add", 748, "u1")), tHeaders...); a.status != 404 {
		t.Errorf("other path: %d", a.status)
	}
}

func TestTalonOneRateLimitAndFaults(t *testing.T) {
	clk := newClock()
	f := NewTalonOne(TalonOneOptions{APIKey: tKey, PerSecond: 2, Now: clk.Now})
	defer f.Close()
	f.CreateAudience(748)
	post := func(p string) answer {
		return send(t, "POST", f.URL()+"/v2/customer_audiences", tBody(tItems("add", 748, p)), tHeaders...)
	}
	post("u1")
	clk.Advance(500 * time.Millisecond)
	post("u2")
	a := post("u3")
	if a.status != 429 || a.header.Get("Retry-After") != "1" || a.json(t)["StatusCode"] != float64(429) {
		t.Fatalf("over the limit: %d %v %s", a.status, a.header, a.body)
	}
	expectViolations(t, f.Violations(), 0, 1, "rate limit")
	clk.Advance(500 * time.Millisecond) // u1 left the window
	if a := post("u3"); a.status != 204 {
		t.Fatalf("after sliding: %d", a.status)
	}
	clk.Advance(2 * time.Second)

	f.Inject(Fault{Status: 429, RetryAfter: 7 * time.Second})
	if a := post("u4"); a.status != 429 || a.header.Get("Retry-After") != "7" {
		t.Fatalf("fault 429: %d %v", a.status, a.header)
	}
	f.Inject(Fault{Status: 503, Count: -1, PathPrefix: "/v2/"})
	for i := 0; i < 3; i++ {
		clk.Advance(time.Second)
		if a := post("u4"); a.status != 503 || a.json(t)["StatusCode"] != float64(503) {
			t.Fatalf("503 #%d: %d", i, a.status)
		}
	}
	f.ClearFaults()
	if a := post("u4"); a.status != 204 {
		t.Fatalf("after ClearFaults: %d", a.status)
	}
	if got := f.AudienceMembers(748); fmt.Sprint(got) != "[u1 u2 u3 u4]" {
		t.Errorf("members %q", got)
	}
	if len(f.Violations()) != 1 {
		t.Errorf("violations %q", f.Violations())
	}
}

// TestConcurrentClients drives all three fakes from many goroutines (meant for -race).
func TestConcurrentClients(t *testing.T) {
	k := NewKlaviyo(KlaviyoOptions{APIKey: kKey, NoRateLimit: true})
	defer k.Close()
	k.CreateList("L")
	b := NewBraze(BrazeOptions{APIKey: bKey})
	defer b.Close()
	f := NewTalonOne(TalonOneOptions{APIKey: tKey})
	defer f.Close()
	f.CreateAudience(1)

	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				u := fmt.Sprintf("u%d-%d", g, i)
				jobBody, _ := json.Marshal(kJobBody("L", kProfile(u+"@x.com", u)))
				a, err := trySend("POST", k.URL()+"/api/profile-bulk-import-jobs", jobBody, kHeaders...)
				var job struct {
					Data struct{ ID string } `json:"data"`
				}
				if err != nil || json.Unmarshal(a.body, &job) != nil || a.status != 202 {
					t.Errorf("create job: %v %d %s", err, a.status, a.body)
					return
				}
				steps := []struct {
					method, url string
					body        []byte
					headers     []string
					want        int
				}{
					{"GET", k.URL() + "/api/profile-bulk-import-jobs/" + job.Data.ID, nil, kHeaders[:2], 200},
					{"POST", b.URL() + "/users/track", bAttrs(map[string]any{"external_id": u, "seg": true}), bHeaders, 201},
					{"POST", f.URL() + "/v2/customer_audiences", tBody(tItems("add", 1, u)), tHeaders, 204},
				}
				for _, s := range steps {
					if a, err := trySend(s.method, s.url, s.body, s.headers...); err != nil || a.status != s.want {
						t.Errorf("%s %s: %v %d %s", s.method, s.url, err, a.status, a.body)
					}
				}
				_ = k.Requests()
				_ = b.RequestCount("POST", "/users")
				_ = f.Violations()
			}
		}(g)
	}
	wg.Wait()
	if n := len(k.ListMembers("L")); n != 80 {
		t.Errorf("klaviyo members %d", n)
	}
	if n := len(b.UsersWith("seg", true)); n != 80 {
		t.Errorf("braze users %d", n)
	}
	if n := len(f.AudienceMembers(1)); n != 80 {
		t.Errorf("talon members %d", n)
	}
	for _, v := range [][]string{k.Violations(), b.Violations(), f.Violations()} {
		if len(v) != 0 {
			t.Errorf("violations %q", v)
		}
	}
}
