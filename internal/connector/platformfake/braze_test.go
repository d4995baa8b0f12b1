package platformfake

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

const bKey = "braze-rest-key-123"

var bHeaders = []string{"Authorization: Bearer " + bKey, "Content-Type: application/json"}

func bAttrs(objs ...map[string]any) []byte {
	return []byte(fmt.Sprintf(`{"attributes":%s}`, must(objs)))
}

func must(v any) string {
	b, err := jsonMarshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestBrazeAuth(t *testing.T) {
	b := NewBraze(BrazeOptions{APIKey: bKey})
	defer b.Close()
	body := bAttrs(map[string]any{"external_id": "u1", "seg": true})
	for _, tc := range []struct {
		name      string
		auth      string
		status    int
		violation bool
	}{
		{"missing header", "", 401, true},
		{"wrong scheme", "Basic " + bKey, 401, true},
		{"no scheme", bKey, 401, true},
		{"wrong key", "Bearer other-key-999", 401, false},
		{"right key", "Bearer " + bKey, 201, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := []string{"Content-Type: application/json"}
			if tc.auth != "" {
				h = append(h, "Authorization: "+tc.auth)
			}
			before := len(b.Violations())
			a := send(t, "POST", b.URL()+"/users/track", body, h...)
			if a.status != tc.status {
				t.Fatalf("status %d, want %d: %s", a.status, tc.status, a.body)
			}
			n := 0
			if tc.violation {
				n = 1
			}
			expectViolations(t, b.Violations(), before, n, "Authorization")
			if a.status == 401 {
				if m := a.json(t)["message"]; m != "Invalid API key: <redacted>" {
					t.Errorf("message %q", m)
				}
				if strings.Contains(string(a.body), "other-key") || strings.Contains(string(a.body), bKey) {
					t.Errorf("401 echoes a key: %s", a.body)
				}
			}
		})
	}
}

func TestBrazeTrack(t *testing.T) {
	b := NewBraze(BrazeOptions{APIKey: bKey})
	defer b.Close()
	a := send(t, "POST", b.URL()+"/users/track", bAttrs(
		map[string]any{"external_id": "u1", "cohort_segment_12": true, "score": 3},
		map[string]any{"external_id": "u2", "cohort_segment_12": true, "email": "u2@x.com"},
		map[string]any{"external_id": "u3", "cohort_segment_12": false},
	), bHeaders...)
	if a.status != 201 {
		t.Fatalf("track: %d %s", a.status, a.body)
	}
	doc := a.json(t)
	if doc["message"] != "success" || doc["attributes_processed"] != float64(3) || doc["errors"] != nil {
		t.Errorf("answer %s", a.body)
	}
	if got := b.UsersWith("cohort_segment_12", true); fmt.Sprint(got) != "[u1 u2]" {
		t.Errorf("UsersWith true: %q", got)
	}
	if got := b.UsersWith("score", 3); fmt.Sprint(got) != "[u1]" {
		t.Errorf("UsersWith int: %q", got)
	}
	if v, ok := b.Attribute("u2", "email"); !ok || v != "u2@x.com" {
		t.Errorf("email attribute %v %v", v, ok)
	}
	// Exit: false; null removes.
	send(t, "POST", b.URL()+"/users/track", bAttrs(
		map[string]any{"external_id": "u1", "cohort_segment_12": false, "score": nil},
	), bHeaders...)
	if got := b.UsersWith("cohort_segment_12", true); fmt.Sprint(got) != "[u2]" {
		t.Errorf("after exit: %q", got)
	}
	if _, ok := b.Attribute("u1", "score"); ok {
		t.Errorf("null did not remove the attribute")
	}
	if len(b.Violations()) != 0 {
		t.Errorf("violations: %q", b.Violations())
	}
}

func TestBrazePerObjectErrors(t *testing.T) {
	b := NewBraze(BrazeOptions{APIKey: bKey})
	defer b.Close()
	a := send(t, "POST", b.URL()+"/users/track", bAttrs(
		map[string]any{"external_id": "u0", "seg": true},
		map[string]any{"seg": true},
		map[string]any{"external_id": 42, "seg": true},
		map[string]any{"external_id": "u3", "braze_id": "b3", "seg": true},
		map[string]any{"external_id": "u4", "seg": true},
	), bHeaders...)
	if a.status != 201 {
		t.Fatalf("status %d: %s", a.status, a.body)
	}
	doc := a.json(t)
	if doc["message"] != "success" || doc["attributes_processed"] != float64(2) {
		t.Errorf("answer %s", a.body)
	}
	errs := doc["errors"].([]any)
	if len(errs) != 3 {
		t.Fatalf("errors %s", a.body)
	}
	for i, want := range []int{1, 2, 3} {
		if path(t, errs[i], "index") != float64(want) || path(t, errs[i], "input_array") != "attributes" {
			t.Errorf("errors[%d] = %v", i, errs[i])
		}
	}
	if path(t, errs[0], "type") != "'external_id' or 'braze_id' or 'user_alias' is required" {
		t.Errorf("type %v", path(t, errs[0], "type"))
	}
	if got := b.UsersWith("seg", true); fmt.Sprint(got) != "[u0 u4]" {
		t.Errorf("users %q", got)
	}
	if v := b.Violations(); len(v) != 3 {
		t.Errorf("violations %q", v)
	}

	// Nothing valid: a fatal 400 with the per-object errors.
	before := len(b.Violations())
	a = send(t, "POST", b.URL()+"/users/track", bAttrs(map[string]any{"seg": true}), bHeaders...)
	if a.status != 400 || !strings.HasPrefix(a.json(t)["message"].(string), "Valid data must be provided") || len(a.json(t)["errors"].([]any)) != 1 {
		t.Errorf("all invalid: %d %s", a.status, a.body)
	}
	expectViolations(t, b.Violations(), before, 1, "attributes[0]")
}

func TestBrazeBodyValidation(t *testing.T) {
	b := NewBraze(BrazeOptions{APIKey: bKey})
	defer b.Close()
	var many []map[string]any
	for i := 0; i <= BrazeMaxObjects; i++ {
		many = append(many, map[string]any{"external_id": strconv.Itoa(i), "seg": true})
	}
	for _, tc := range []struct {
		name    string
		body    string
		headers []string
		status  int
		want    string
	}{
		{"76 attributes", string(bAttrs(many...)), bHeaders, 400, "76 attributes"},
		{"unknown top-level key", `{"attribute":[{"external_id":"u1","seg":true}]}`, bHeaders, 400, "unknown key"},
		{"attributes not an array", `{"attributes":{"external_id":"u1"}}`, bHeaders, 400, "array"},
		{"nothing to do", `{"attributes":[]}`, bHeaders, 400, "no attributes"},
		{"not JSON", `{"attributes":[`, bHeaders, 400, "JSON"},
		{"text content type", `{"attributes":[{"external_id":"u1","seg":true}]}`, []string{"Authorization: Bearer " + bKey, "Content-Type: text/plain"}, 400, "Content-Type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(b.Violations())
			a := send(t, "POST", b.URL()+"/users/track", []byte(tc.body), tc.headers...)
			if a.status != tc.status {
				t.Fatalf("status %d: %s", a.status, a.body)
			}
			if _, ok := a.json(t)["message"].(string); !ok {
				t.Errorf("no message: %s", a.body)
			}
			expectViolations(t, b.Violations(), before, 1, tc.want)
		})
	}
	if got := b.UsersWith("seg", true); len(got) != 0 {
		t.Errorf("rejected requests changed state: %q", got)
	}
	// Combined limit (newer workspaces): 40 attributes + 40 events is over.
	bc := NewBraze(BrazeOptions{APIKey: bKey, CombinedBatchLimit: true})
	defer bc.Close()
	var attrs, events []map[string]any
	for i := 0; i < 40; i++ {
		attrs = append(attrs, map[string]any{"external_id": strconv.Itoa(i), "seg": true})
		events = append(events, map[string]any{"external_id": strconv.Itoa(i), "name": "e", "time": "2025-01-01T00:00:00Z"})
	}
	if a := send(t, "POST", bc.URL()+"/users/track", []byte(must(map[string]any{"attributes": attrs, "events": events})), bHeaders...); a.status != 400 || len(bc.Violations()) != 1 {
		t.Errorf("combined limit: %d %q", a.status, bc.Violations())
	}
	if a := send(t, "POST", b.URL()+"/users/track", []byte(must(map[string]any{"attributes": attrs, "events": events})), bHeaders...); a.status != 201 || a.json(t)["events_processed"] != float64(40) {
		t.Errorf("per-array limit: %d %s", a.status, a.body)
	}
	if a := send(t, "POST", b.URL()+"/users/trak", bAttrs(map[string]any{"external_id": "u"}), bHeaders...); a.status != 404 {
		t.Errorf("other path: %d", a.status)
	}
	if a := send(t, "GET", b.URL()+"/users/track", nil, bHeaders...); a.status != 405 {
		t.Errorf("GET: %d", a.status)
	}
}

func TestBrazeRateLimit(t *testing.T) {
	clk := newClock()
	b := NewBraze(BrazeOptions{APIKey: bKey, PerMinute: 2, Now: clk.Now})
	defer b.Close()
	body := bAttrs(map[string]any{"external_id": "u1", "seg": true})
	for i := 0; i < 2; i++ {
		a := send(t, "POST", b.URL()+"/users/track", body, bHeaders...)
		if a.status != 201 || a.header.Get("X-RateLimit-Limit") != "2" || a.header.Get("X-RateLimit-Remaining") != strconv.Itoa(1-i) {
			t.Fatalf("request %d: %d %v", i, a.status, a.header)
		}
	}
	clk.Advance(30 * time.Second)
	a := send(t, "POST", b.URL()+"/users/track", body, bHeaders...)
	wantReset := strconv.FormatInt(clk.Now().Add(30*time.Second).Unix(), 10)
	if a.status != 429 || a.header.Get("X-RateLimit-Limit") != "2" || a.header.Get("X-RateLimit-Remaining") != "0" || a.header.Get("X-RateLimit-Reset") != wantReset {
		t.Fatalf("over the limit: %d %v (want reset %s)", a.status, a.header, wantReset)
	}
	if a.header.Get("Retry-After") != "" {
		t.Errorf("Braze documents no Retry-After")
	}
	expectViolations(t, b.Violations(), 0, 1, "rate limit")
	clk.Advance(30 * time.Second)
	if a := send(t, "POST", b.URL()+"/users/track", body, bHeaders...); a.status != 201 {
		t.Fatalf("after the window slid: %d", a.status)
	}
}

func TestBrazeFaults(t *testing.T) {
	clk := newClock()
	b := NewBraze(BrazeOptions{APIKey: bKey, Now: clk.Now})
	defer b.Close()
	body := bAttrs(map[string]any{"external_id": "u1", "seg": true})
	b.Inject(Fault{Status: 429, RetryAfter: 5 * time.Second})
	a := send(t, "POST", b.URL()+"/users/track", body, bHeaders...)
	if a.status != 429 || a.header.Get("X-RateLimit-Reset") != strconv.FormatInt(clk.Now().Unix()+5, 10) || a.header.Get("X-RateLimit-Remaining") != "0" || a.header.Get("X-RateLimit-Limit") == "" {
		t.Fatalf("fault 429: %d %v", a.status, a.header)
	}
	if _, ok := b.Attribute("u1", "seg"); ok {
		t.Fatalf("faulted request changed state")
	}
	b.Inject(Fault{Status: 500, Count: -1, Message: "Internal error"})
	for i := 0; i < 3; i++ {
		if a := send(t, "POST", b.URL()+"/users/track", body, bHeaders...); a.status != 500 || a.json(t)["message"] != "Internal error" {
			t.Fatalf("500 #%d: %d %s", i, a.status, a.body)
		}
	}
	b.ClearFaults()
	b.Inject(Fault{Status: 401, Count: -1})
	if a := send(t, "POST", b.URL()+"/users/track", body, bHeaders...); a.status != 401 {
		t.Fatalf("401 fault: %d", a.status)
	}
	b.ClearFaults()
	if a := send(t, "POST", b.URL()+"/users/track", body, bHeaders...); a.status != 201 {
		t.Fatalf("after ClearFaults: %d", a.status)
	}
	if len(b.Violations()) != 0 {
		t.Errorf("violations %q", b.Violations())
	}
}
