package platformfake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strconv"
	"time"
)

// Braze batch limit: objects per array (attributes, events, purchases) in one /users/track
// request (braze.com/docs/api/api_limits).
const BrazeMaxObjects = 75

// brazeDocumentedLimit is what X-RateLimit-Limit says on an injected 429 when no limit is
// configured: Braze's documented /users/track limit (3,000 requests per three seconds).
const brazeDocumentedLimit = 3000

// BrazeOptions configure the Braze fake.
type BrazeOptions struct {
	// APIKey is the REST API key expected in "Authorization: Bearer <key>".
	APIKey string
	// PerMinute is the most /users/track requests in any 60 s (sliding); 0 is no limit.
	PerMinute int
	// PerThreeSeconds is the most requests in any 3 s (Braze documents 3,000 per three seconds
	// for /users/track); 0 is no limit.
	PerThreeSeconds int
	// CombinedBatchLimit applies the 75-object limit to attributes, events and purchases
	// together (the limit Braze documents for newer workspaces) instead of to each array.
	CombinedBatchLimit bool
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Braze is a fake of Braze's POST /users/track.
type Braze struct {
	base
	opts    BrazeOptions
	limiter *slidingLimiter

	// state, guarded by base.mu
	users  map[string]map[string]any // external_id -> attribute -> value
	others map[string]map[string]any // users identified otherwise ("braze_id:..", "email:..")
}

// NewBraze starts a Braze fake.
func NewBraze(opts BrazeOptions) *Braze {
	b := &Braze{opts: opts, users: map[string]map[string]any{}, others: map[string]map[string]any{}}
	var ws []window
	if opts.PerThreeSeconds > 0 {
		ws = append(ws, window{limit: opts.PerThreeSeconds, span: 3 * time.Second})
	}
	if opts.PerMinute > 0 {
		ws = append(ws, window{limit: opts.PerMinute, span: time.Minute})
	}
	if len(ws) > 0 {
		b.limiter = &slidingLimiter{windows: ws}
	}
	b.start(opts.Now, platformHooks{
		name:       "braze",
		auth:       func(r *http.Request) (bool, bool, string) { return checkScheme(r, "Bearer", opts.APIKey) },
		preflight:  b.preflight,
		writeError: b.writeError,
		handle:     b.handle,
	})
	return b
}

// Attribute returns the user's attribute value (JSON-decoded: bool, float64, string, []any,
// map[string]any).
func (b *Braze) Attribute(externalID, name string) (any, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.users[externalID][name]
	return v, ok
}

// UsersWith returns the sorted external ids whose attribute name equals value (numbers compare
// by value whatever their Go type).
func (b *Braze) UsersWith(name string, value any) []string {
	want := normalizeJSONValue(value)
	b.mu.Lock()
	defer b.mu.Unlock()
	out := []string{}
	for id, attrs := range b.users {
		if v, ok := attrs[name]; ok && reflect.DeepEqual(v, want) {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// normalizeJSONValue turns Go numbers into float64 (what JSON decoding gives).
func normalizeJSONValue(v any) any {
	switch n := v.(type) {
	case int:
		return float64(n)
	case int8:
		return float64(n)
	case int16:
		return float64(n)
	case int32:
		return float64(n)
	case int64:
		return float64(n)
	case uint:
		return float64(n)
	case uint8:
		return float64(n)
	case uint16:
		return float64(n)
	case uint32:
		return float64(n)
	case uint64:
		return float64(n)
	case float32:
		return float64(n)
	}
	return v
}

func (b *Braze) preflight(w http.ResponseWriter, r *http.Request, body []byte) bool {
	if len(body) > 0 && mediaType(r) != "application/json" {
		b.violate(r, "Content-Type %q, want application/json", r.Header.Get("Content-Type"))
		b.writeMessage(w, http.StatusBadRequest, fmt.Sprintf("Content-Type must be application/json, got %q", r.Header.Get("Content-Type")))
		return false
	}
	return true
}

func brazeDefault(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "Bad Request"
	case http.StatusUnauthorized:
		return "Invalid API key: <redacted>"
	case http.StatusForbidden:
		return "Forbidden: the API key lacks the users.track permission"
	case http.StatusNotFound:
		return "Not Found"
	case http.StatusTooManyRequests:
		return "Rate Limited: too many requests"
	case http.StatusInternalServerError:
		return "Internal Server Error"
	case http.StatusServiceUnavailable:
		return "Service Unavailable"
	}
	return http.StatusText(status)
}

// writeError is the pipeline's error writer: {"message": ...}; 429 carries X-RateLimit-* (Braze
// documents no Retry-After).
func (b *Braze) writeError(w http.ResponseWriter, status int, msg string, retryAfter time.Duration, _ bool) {
	if msg == "" {
		msg = brazeDefault(status)
	}
	if status == http.StatusTooManyRequests {
		limit := brazeDocumentedLimit
		if b.limiter != nil {
			limit = b.limiter.windows[len(b.limiter.windows)-1].limit
		}
		b.rateHeaders(w, limit, 0, retryAfter)
	}
	b.writeMessage(w, status, msg)
}

func (b *Braze) rateHeaders(w http.ResponseWriter, limit, remaining int, resetIn time.Duration) {
	reset := b.now().Add(resetIn)
	secs := reset.Unix()
	if reset.Nanosecond() > 0 || resetIn <= 0 {
		secs++ // round up: the window has reset by then
	}
	if limit > 0 {
		w.Header().Set("X-RateLimit-Limit", strconv.Itoa(limit))
	}
	w.Header().Set("X-RateLimit-Remaining", strconv.Itoa(remaining))
	w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(secs, 10))
}

func (b *Braze) writeMessage(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, "application/json", map[string]any{"message": msg})
}

func (b *Braze) handle(w http.ResponseWriter, r *http.Request, body []byte) {
	if trimSlash(r.URL.Path) != "/users/track" {
		b.writeError(w, http.StatusNotFound, fmt.Sprintf("No endpoint %s in this fake (only POST /users/track)", r.URL.Path), 0, false)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		b.writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("Method %s not allowed", r.Method), 0, false)
		return
	}
	if b.limiter != nil {
		b.mu.Lock()
		now := b.now()
		ok, win, wait := b.limiter.admit(now)
		if !ok {
			b.violateLocked(r, "rate limit exceeded: more than %d requests in %s", win.limit, win.span)
			b.mu.Unlock()
			b.rateHeaders(w, win.limit, 0, wait)
			b.writeMessage(w, http.StatusTooManyRequests, brazeDefault(http.StatusTooManyRequests))
			return
		}
		reported := b.limiter.windows[len(b.limiter.windows)-1]
		n, reset := b.limiter.usage(now, reported)
		b.mu.Unlock()
		b.rateHeaders(w, reported.limit, max(0, reported.limit-n), reset)
	}
	b.track(w, r, body)
}

// brazeObjErr is one per-object error of a 201 (or fatal 400) answer.
type brazeObjErr struct {
	Type       string `json:"type"`
	InputArray string `json:"input_array"`
	Index      int    `json:"index"`
}

// brazeObject is one validated attributes/events/purchases object.
type brazeObject struct {
	key      string // "" when the object failed
	external bool   // key is an external_id
	attrs    map[string]json.RawMessage
	updateEx bool // _update_existing_only
}

var brazeIdentifierKeys = map[string]bool{"external_id": true, "user_alias": true, "braze_id": true}

var brazeReservedKeys = map[string]bool{
	"external_id": true, "user_alias": true, "braze_id": true,
	"_update_existing_only": true, "push_token_import": true, "_merge_objects": true,
}

func (b *Braze) track(w http.ResponseWriter, r *http.Request, body []byte) {
	doc, se := parseDoc(body)
	if se == nil {
		se = onlyKeys("", doc, "attributes", "events", "purchases")
	}
	if se != nil {
		b.violate(r, "%s", se.Error())
		b.writeMessage(w, http.StatusBadRequest, se.Error())
		return
	}
	arrays := map[string][]json.RawMessage{}
	total := 0
	for _, name := range []string{"attributes", "events", "purchases"} {
		raw, ok := doc[name]
		if !ok {
			continue
		}
		items, se := arrayAt("/"+name, raw)
		if se != nil {
			b.violate(r, "%s", se.Error())
			b.writeMessage(w, http.StatusBadRequest, fmt.Sprintf("'%s' must be an array of objects", name))
			return
		}
		if len(items) > BrazeMaxObjects {
			b.violate(r, "%d %s objects, at most %d per request", len(items), name, BrazeMaxObjects)
			b.writeMessage(w, http.StatusBadRequest, fmt.Sprintf("Too many %s: at most %d objects per request", name, BrazeMaxObjects))
			return
		}
		arrays[name] = items
		total += len(items)
	}
	if b.opts.CombinedBatchLimit && total > BrazeMaxObjects {
		b.violate(r, "%d objects in attributes, events and purchases together, at most %d per request", total, BrazeMaxObjects)
		b.writeMessage(w, http.StatusBadRequest, fmt.Sprintf("Too many objects: at most %d attributes, events and purchases combined per request", BrazeMaxObjects))
		return
	}
	if total == 0 {
		b.violate(r, "no attributes, events or purchases")
		b.writeMessage(w, http.StatusBadRequest, "Valid data must be provided in the 'attributes', 'events', or 'purchases' fields.")
		return
	}

	var errs []brazeObjErr
	processed := map[string]int{}
	var attrObjs []brazeObject
	for _, name := range []string{"attributes", "events", "purchases"} {
		items, ok := arrays[name]
		if !ok {
			continue
		}
		processed[name] = 0
		for i, raw := range items {
			obj, msg := parseBrazeObject(name, raw)
			if msg != "" {
				errs = append(errs, brazeObjErr{Type: msg, InputArray: name, Index: i})
				b.violate(r, "%s[%d]: %s", name, i, msg)
				continue
			}
			processed[name]++
			if name == "attributes" {
				attrObjs = append(attrObjs, obj)
			}
		}
	}
	ok := 0
	for _, n := range processed {
		ok += n
	}
	if ok == 0 {
		writeJSON(w, http.StatusBadRequest, "application/json", map[string]any{
			"message": "Valid data must be provided in the 'attributes', 'events', or 'purchases' fields.",
			"errors":  errs,
		})
		return
	}

	b.mu.Lock()
	for _, o := range attrObjs {
		b.applyLocked(o)
	}
	b.mu.Unlock()

	resp := map[string]any{"message": "success"}
	for name, n := range processed {
		resp[name+"_processed"] = n
	}
	if len(errs) > 0 {
		resp["errors"] = errs
	}
	writeJSON(w, http.StatusCreated, "application/json", resp)
}

// parseBrazeObject validates one object; msg is its per-object error ("" when valid).
func parseBrazeObject(array string, raw json.RawMessage) (brazeObject, string) {
	var o brazeObject
	obj, se := objectAt("", raw)
	if se != nil {
		return o, fmt.Sprintf("'%s' items must be objects", array)
	}
	o.attrs = obj
	var ids []string
	for k := range brazeIdentifierKeys {
		if raw, ok := obj[k]; ok && jsonKind(raw) != "null" {
			ids = append(ids, k)
		}
	}
	sort.Strings(ids)
	switch {
	case len(ids) > 1:
		return o, fmt.Sprintf("only one of 'external_id', 'braze_id' or 'user_alias' may be provided, got %v", ids)
	case len(ids) == 1:
		switch ids[0] {
		case "external_id", "braze_id":
			s, se := stringAt("", obj[ids[0]])
			if se != nil || s == "" {
				return o, fmt.Sprintf("'%s' is not valid: must be a non-empty string", ids[0])
			}
			if ids[0] == "external_id" {
				o.key, o.external = s, true
			} else {
				o.key = "braze_id:" + s
			}
		case "user_alias":
			alias, se := objectAt("", obj["user_alias"])
			if se != nil || onlyKeys("", alias, "alias_name", "alias_label") != nil {
				return o, "'user_alias' is not valid: must be {\"alias_name\": ..., \"alias_label\": ...}"
			}
			an, e1 := stringAt("", alias["alias_name"])
			al, e2 := stringAt("", alias["alias_label"])
			if e1 != nil || e2 != nil || an == "" || al == "" {
				return o, "'user_alias' is not valid: alias_name and alias_label must be non-empty strings"
			}
			o.key = "user_alias:" + al + ":" + an
		}
	default:
		// Without one of the three, email or phone identify the user.
		for _, k := range []string{"email", "phone"} {
			if raw, ok := obj[k]; ok && jsonKind(raw) != "null" {
				s, se := stringAt("", raw)
				if se != nil || s == "" {
					return o, fmt.Sprintf("'%s' is not valid: must be a non-empty string", k)
				}
				o.key = k + ":" + s
				break
			}
		}
		if o.key == "" {
			return o, "'external_id' or 'braze_id' or 'user_alias' is required"
		}
	}
	if raw, ok := obj["_update_existing_only"]; ok {
		var v bool
		if jsonKind(raw) != "boolean" || json.Unmarshal(raw, &v) != nil {
			return o, "'_update_existing_only' must be a boolean"
		}
		o.updateEx = v
	}
	switch array {
	case "events":
		if se := requireStrings(obj, "name", "time"); se != "" {
			return o, se
		}
	case "purchases":
		if se := requireStrings(obj, "product_id", "currency", "time"); se != "" {
			return o, se
		}
		if raw, ok := obj["price"]; !ok || jsonKind(raw) != "number" {
			return o, "'price' is not valid"
		}
	case "attributes":
		for k := range obj {
			if k == "" {
				return o, "attribute names must not be empty"
			}
		}
	}
	return o, ""
}

func requireStrings(obj map[string]json.RawMessage, keys ...string) string {
	for _, k := range keys {
		raw, ok := obj[k]
		if !ok || jsonKind(raw) != "string" {
			return fmt.Sprintf("'%s' is required and must be a string", k)
		}
	}
	return ""
}

// applyLocked sets the attributes of one valid object (null removes an attribute).
func (b *Braze) applyLocked(o brazeObject) {
	store := b.others
	if o.external {
		store = b.users
	}
	attrs, exists := store[o.key]
	if !exists {
		if o.updateEx {
			return
		}
		attrs = map[string]any{}
		store[o.key] = attrs
	}
	for k, raw := range o.attrs {
		if brazeReservedKeys[k] {
			continue
		}
		var v any
		_ = json.Unmarshal(raw, &v)
		if v == nil {
			delete(attrs, k)
			continue
		}
		attrs[k] = v
	}
}
