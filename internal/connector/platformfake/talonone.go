package platformfake

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"time"
)

// TalonOneMaxItems is the most items in one POST /v2/customer_audiences ("The limit of customer
// profiles per request is 1000", Integration API updateCustomerProfileAudiences).
const TalonOneMaxItems = 1000

// TalonOneOptions configure the Talon.One fake.
type TalonOneOptions struct {
	// APIKey is the Integration API key expected in "Authorization: ApiKey-v1 <key>".
	APIKey string
	// PerSecond is the most requests in any second (sliding); 0 is no limit. Talon.One
	// publishes no fixed limit.
	PerSecond int
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// TalonOne is a fake of Talon.One's Integration API "Update multiple customer profiles'
// audiences" (POST /v2/customer_audiences).
type TalonOne struct {
	base
	opts    TalonOneOptions
	limiter *slidingLimiter

	// state, guarded by base.mu
	audiences map[int64]map[string]bool
}

// NewTalonOne starts a Talon.One fake.
func NewTalonOne(opts TalonOneOptions) *TalonOne {
	t := &TalonOne{opts: opts, audiences: map[int64]map[string]bool{}}
	if opts.PerSecond > 0 {
		t.limiter = &slidingLimiter{windows: []window{{limit: opts.PerSecond, span: time.Second}}}
	}
	t.start(opts.Now, platformHooks{
		name:       "talon_one",
		auth:       func(r *http.Request) (bool, bool, string) { return checkScheme(r, "ApiKey-v1", opts.APIKey) },
		preflight:  t.preflight,
		writeError: t.writeError,
		handle:     t.handle,
	})
	return t
}

// CreateAudience makes an audience exist (idempotent).
func (t *TalonOne) CreateAudience(id int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.audiences[id] == nil {
		t.audiences[id] = map[string]bool{}
	}
}

// AudienceMembers returns the audience's profileIntegrationIds, sorted.
func (t *TalonOne) AudienceMembers(id int64) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := []string{}
	for p := range t.audiences[id] {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

type talonAPIError struct {
	Title   string            `json:"title"`
	Details string            `json:"details,omitempty"`
	Source  map[string]string `json:"source"`
}

// writeDoc answers Talon.One's ErrorResponseWithStatus.
func (t *TalonOne) writeDoc(w http.ResponseWriter, status int, msg string, errs ...talonAPIError) {
	doc := map[string]any{"message": msg, "StatusCode": status}
	if len(errs) > 0 {
		doc["errors"] = errs
	}
	writeJSON(w, status, "application/json", doc)
}

func talonDefault(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "bad request"
	case http.StatusUnauthorized:
		return "unauthorized"
	case http.StatusForbidden:
		return "forbidden"
	case http.StatusNotFound:
		return "not found"
	case http.StatusConflict:
		return "too many requests: avoid parallel requests"
	case http.StatusTooManyRequests:
		return "too many requests"
	case http.StatusServiceUnavailable:
		return "service unavailable"
	}
	if status >= 500 {
		return "internal server error"
	}
	return http.StatusText(status)
}

// writeError is the pipeline's error writer; 429 carries Retry-After in seconds.
func (t *TalonOne) writeError(w http.ResponseWriter, status int, msg string, retryAfter time.Duration, _ bool) {
	if msg == "" {
		msg = talonDefault(status)
	}
	var errs []talonAPIError
	switch status {
	case http.StatusUnauthorized:
		errs = append(errs, talonAPIError{Title: "unauthorized", Details: "missing or invalid API key", Source: map[string]string{"parameter": "Authorization"}})
	case http.StatusTooManyRequests:
		w.Header().Set("Retry-After", strconv.FormatInt(ceilSeconds(retryAfter), 10))
	}
	t.writeDoc(w, status, msg, errs...)
}

func (t *TalonOne) preflight(w http.ResponseWriter, r *http.Request, body []byte) bool {
	if len(body) > 0 && mediaType(r) != "application/json" {
		t.violate(r, "Content-Type %q, want application/json", r.Header.Get("Content-Type"))
		t.writeDoc(w, http.StatusBadRequest, "unsupported content type", talonAPIError{
			Title: "unsupported content type", Details: fmt.Sprintf("Content-Type must be application/json, got %q", r.Header.Get("Content-Type")),
			Source: map[string]string{"parameter": "Content-Type"},
		})
		return false
	}
	return true
}

func (t *TalonOne) handle(w http.ResponseWriter, r *http.Request, body []byte) {
	if trimSlash(r.URL.Path) != "/v2/customer_audiences" {
		t.writeError(w, http.StatusNotFound, fmt.Sprintf("no endpoint %s in this fake (only POST /v2/customer_audiences)", r.URL.Path), 0, false)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		t.writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed", r.Method), 0, false)
		return
	}
	if t.limiter != nil {
		t.mu.Lock()
		ok, win, wait := t.limiter.admit(t.now())
		if !ok {
			t.violateLocked(r, "rate limit exceeded: more than %d requests in %s", win.limit, win.span)
		}
		t.mu.Unlock()
		if !ok {
			t.writeError(w, http.StatusTooManyRequests, "", wait, false)
			return
		}
	}
	items, se := parseTalonAudiences(body)
	if se != nil {
		t.violate(r, "%s", se.Error())
		t.writeDoc(w, http.StatusBadRequest, "bad request: "+se.Error(), talonAPIError{
			Title: "invalid request body", Details: se.msg, Source: map[string]string{"pointer": se.pointer},
		})
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, it := range items {
		if t.audiences[it.audienceID] == nil {
			t.writeDoc(w, http.StatusNotFound, fmt.Sprintf("audience %d not found", it.audienceID), talonAPIError{
				Title: "not found", Details: fmt.Sprintf("audience with id %d does not exist", it.audienceID),
				Source: map[string]string{"pointer": fmt.Sprintf("/data/%d/audienceId", i)},
			})
			return
		}
	}
	for _, it := range items {
		if it.add {
			t.audiences[it.audienceID][it.profile] = true
		} else {
			delete(t.audiences[it.audienceID], it.profile)
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

type talonItem struct {
	add        bool
	profile    string
	audienceID int64
}

// parseTalonAudiences validates {"data":[{"action","profileIntegrationId","audienceId"}]}.
func parseTalonAudiences(body []byte) ([]talonItem, *shapeError) {
	doc, se := parseDoc(body)
	if se != nil {
		return nil, se
	}
	if se := onlyKeys("", doc, "data"); se != nil {
		return nil, se
	}
	raw, ok := doc["data"]
	if !ok {
		return nil, shapef("/data", "required")
	}
	arr, se := arrayAt("/data", raw)
	if se != nil {
		return nil, se
	}
	if len(arr) > TalonOneMaxItems {
		return nil, shapef("/data", "%d items, at most %d per request", len(arr), TalonOneMaxItems)
	}
	items := make([]talonItem, len(arr))
	for i, raw := range arr {
		ptr := fmt.Sprintf("/data/%d", i)
		obj, se := objectAt(ptr, raw)
		if se != nil {
			return nil, se
		}
		if se := onlyKeys(ptr, obj, "action", "profileIntegrationId", "audienceId"); se != nil {
			return nil, se
		}
		for _, k := range []string{"action", "profileIntegrationId", "audienceId"} {
			if _, ok := obj[k]; !ok {
				return nil, shapef(ptr+"/"+k, "required")
			}
		}
		action, se := stringAt(ptr+"/action", obj["action"])
		if se != nil {
			return nil, se
		}
		switch action {
		case "add":
			items[i].add = true
		case "delete":
		default:
			return nil, shapef(ptr+"/action", "action %q, want \"add\" or \"delete\"", action)
		}
		if items[i].profile, se = stringAt(ptr+"/profileIntegrationId", obj["profileIntegrationId"]); se != nil {
			return nil, se
		}
		if items[i].profile == "" {
			return nil, shapef(ptr+"/profileIntegrationId", "must not be empty")
		}
		if items[i].audienceID, se = intAt(ptr+"/audienceId", obj["audienceId"]); se != nil {
			return nil, se
		}
		if items[i].audienceID <= 0 {
			return nil, shapef(ptr+"/audienceId", "must be a positive integer")
		}
	}
	return items, nil
}
