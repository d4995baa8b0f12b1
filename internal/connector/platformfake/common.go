// Package platformfake holds loopback fakes of the activation platforms Cohort syncs segment
// membership to — Klaviyo, Braze and Talon.One — written from the platforms' public API
// documentation. Each fake is an httptest server on 127.0.0.1 that keeps the state a real
// platform would (profiles and lists, custom attributes, audiences), answers in the platform's
// own success and error shapes, enforces its documented batch and rate limits, and records every
// request plus every contract violation it saw (malformed auth header, bad body shape, too many
// items, rate limit exceeded). A correct client produces no violations.
//
// Every handler runs the same pipeline:
//
//  1. read the body (gzip is decompressed) and record the request;
//  2. check authentication (a missing or malformed header is a 401 and a violation; a well-formed
//     header with the wrong key is a plain 401);
//  3. check protocol headers (Klaviyo's revision, content types);
//  4. apply an injected Fault, if one matches (the request then changes no state);
//  5. route; apply the rate limit (a request over it is a 429 and a violation);
//  6. validate the body strictly and apply it.
//
// Requests answered by a fault, by a 401 or by a 429 do not count towards the rate-limit windows.
package platformfake

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"time"
)

// Request is one recorded request.
type Request struct {
	Method, Path, RawQuery string
	Header                 http.Header // cloned
	Body                   []byte      // raw (decompressed if gzip)
	At                     time.Time   // arrival, by the fake's clock (Options.Now)
	Status                 int         // what the fake answered (0 while the request is in flight)
}

// Fault makes the next Count matching requests (Count < 0: every request until ClearFaults)
// answer Status. Count 0 is taken as 1.
type Fault struct {
	Status     int           // e.g. 429, 500, 503, 401
	Count      int           // how many requests; < 0 for all until ClearFaults
	RetryAfter time.Duration // for 429: sent as the platform sends it (see each platform)
	Message    string        // platform error message; a sensible default per status
	PathPrefix string        // only requests whose path starts with this ("" = all)
}

// maxBody bounds every request body the fakes read (after decompression).
const maxBody = 64 << 20

// platformHooks is what each platform plugs into the shared pipeline.
type platformHooks struct {
	name string
	// auth checks the credentials: ok, or a reason for the 401 and whether the header was
	// malformed (a violation) rather than merely carrying the wrong key.
	auth func(r *http.Request) (ok bool, malformed bool, reason string)
	// preflight checks protocol headers before faults; it writes the answer and returns false
	// when the request must stop.
	preflight func(w http.ResponseWriter, r *http.Request, body []byte) bool
	// writeError answers status in the platform's error shape; msg "" is the default message of
	// the status. retryAfter is only used for 429.
	writeError func(w http.ResponseWriter, status int, msg string, retryAfter time.Duration, unauthorizedBadHeader bool)
	// handle routes and serves an authenticated, fault-free request.
	handle func(w http.ResponseWriter, r *http.Request, body []byte)
}

// base is what the three fakes share: the server, the request log, faults and violations.
type base struct {
	srv   *httptest.Server
	now   func() time.Time
	hooks platformHooks

	mu         sync.Mutex
	reqs       []*Request
	faults     []*Fault
	violations []string
}

func (b *base) start(now func() time.Time, hooks platformHooks) {
	if now == nil {
		now = time.Now
	}
	b.now = now
	b.hooks = hooks
	b.srv = httptest.NewServer(http.HandlerFunc(b.serve))
}

// URL is the fake's base URL (http://127.0.0.1:port, no trailing slash).
func (b *base) URL() string { return b.srv.URL }

// Close shuts the server down.
func (b *base) Close() { b.srv.Close() }

// Requests returns a copy of the request log in arrival order.
func (b *base) Requests() []Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Request, len(b.reqs))
	for i, r := range b.reqs {
		out[i] = *r
		out[i].Header = r.Header.Clone()
		out[i].Body = append([]byte(nil), r.Body...)
	}
	return out
}

// RequestCount counts the logged requests with this method ("" = any) whose path starts with
// pathPrefix.
func (b *base) RequestCount(method, pathPrefix string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, r := range b.reqs {
		if (method == "" || strings.EqualFold(r.Method, method)) && strings.HasPrefix(r.Path, pathPrefix) {
			n++
		}
	}
	return n
}

// Reset clears the request log (not the platform state, faults or violations).
func (b *base) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reqs = nil
}

// Inject adds a fault. Faults are matched in the order they were injected.
func (b *base) Inject(f Fault) {
	if f.Count == 0 {
		f.Count = 1
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.faults = append(b.faults, &f)
}

// ClearFaults removes every fault.
func (b *base) ClearFaults() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.faults = nil
}

// Violations returns every contract or rate-limit violation seen, in order.
func (b *base) Violations() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.violations...)
}

// violate records a violation; the caller must hold b.mu.
func (b *base) violateLocked(r *http.Request, format string, args ...any) {
	b.violations = append(b.violations, fmt.Sprintf("%s: %s %s: %s", b.hooks.name, r.Method, r.URL.Path, fmt.Sprintf(format, args...)))
}

func (b *base) violate(r *http.Request, format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.violateLocked(r, format, args...)
}

// takeFault returns the first fault matching path and consumes one use of it.
func (b *base) takeFault(path string) (Fault, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, f := range b.faults {
		if !strings.HasPrefix(path, f.PathPrefix) {
			continue
		}
		got := *f
		if f.Count > 0 {
			f.Count--
			if f.Count == 0 {
				b.faults = append(b.faults[:i:i], b.faults[i+1:]...)
			}
		}
		return got, true
	}
	return Fault{}, false
}

// statusWriter remembers the status written.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(p)
}

func (b *base) serve(rw http.ResponseWriter, r *http.Request) {
	w := &statusWriter{ResponseWriter: rw}
	rec := &Request{
		Method:   r.Method,
		Path:     r.URL.Path,
		RawQuery: r.URL.RawQuery,
		Header:   r.Header.Clone(),
		At:       b.now(),
	}
	b.mu.Lock()
	b.reqs = append(b.reqs, rec)
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		rec.Status = w.status
		b.mu.Unlock()
	}()

	body, tooLarge, err := readBody(r)
	b.mu.Lock()
	rec.Body = body
	b.mu.Unlock()
	if ok, malformed, reason := b.hooks.auth(r); !ok {
		if malformed {
			b.violate(r, "%s", reason)
		}
		b.hooks.writeError(w, http.StatusUnauthorized, "", 0, malformed)
		return
	}
	switch {
	case tooLarge:
		b.violate(r, "request body larger than %d bytes", maxBody)
		b.hooks.writeError(w, http.StatusRequestEntityTooLarge, "request body too large", 0, false)
		return
	case err != nil:
		b.violate(r, "unreadable request body: %v", err)
		b.hooks.writeError(w, http.StatusBadRequest, "unreadable request body: "+err.Error(), 0, false)
		return
	}
	if b.hooks.preflight != nil && !b.hooks.preflight(w, r, body) {
		return
	}
	if f, ok := b.takeFault(r.URL.Path); ok {
		b.hooks.writeError(w, f.Status, f.Message, f.RetryAfter, false)
		return
	}
	b.hooks.handle(w, r, body)
}

// readBody reads the whole body, decompressing gzip.
func readBody(r *http.Request) (body []byte, tooLarge bool, err error) {
	if r.Body == nil {
		return nil, false, nil
	}
	var rd io.Reader = r.Body
	if strings.EqualFold(strings.TrimSpace(r.Header.Get("Content-Encoding")), "gzip") {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			return nil, false, fmt.Errorf("gzip: %w", err)
		}
		defer zr.Close()
		rd = zr
	}
	body, err = io.ReadAll(io.LimitReader(rd, maxBody+1))
	if err != nil {
		return body, false, err
	}
	if len(body) > maxBody {
		return body[:maxBody], true, nil
	}
	return body, false, nil
}

// --- rate limiting -------------------------------------------------------------------------

// window is a sliding window over admitted request times.
type window struct {
	limit int
	span  time.Duration
}

// slidingLimiter keeps the admitted request times of one endpoint group.
type slidingLimiter struct {
	windows []window
	times   []time.Time // ascending
}

// admit reports whether a request at now fits in every window; if it does it is recorded. If
// not, it returns the violated window and how long until the request would fit.
func (l *slidingLimiter) admit(now time.Time) (ok bool, violated window, wait time.Duration) {
	longest := time.Duration(0)
	for _, w := range l.windows {
		longest = max(longest, w.span)
	}
	// Drop times no window can see any more.
	cut := 0
	for cut < len(l.times) && !l.times[cut].After(now.Add(-longest)) {
		cut++
	}
	l.times = l.times[cut:]
	for _, w := range l.windows {
		if w.limit <= 0 {
			continue
		}
		in := l.inWindow(now, w.span)
		if len(in) >= w.limit {
			// The request fits once the (len-limit)th time in the window leaves it.
			free := in[len(in)-w.limit].Add(w.span).Sub(now)
			if violated.limit == 0 || free > wait {
				violated, wait = w, free
			}
		}
	}
	if violated.limit != 0 {
		return false, violated, max(wait, time.Millisecond)
	}
	l.times = append(l.times, now)
	return true, window{}, 0
}

// inWindow returns the recorded times in (now-span, now].
func (l *slidingLimiter) inWindow(now time.Time, span time.Duration) []time.Time {
	start := now.Add(-span)
	i := sort.Search(len(l.times), func(i int) bool { return l.times[i].After(start) })
	return l.times[i:]
}

// usage returns how many requests the window holds now and when its oldest leaves it.
func (l *slidingLimiter) usage(now time.Time, w window) (n int, resetIn time.Duration) {
	in := l.inWindow(now, w.span)
	if len(in) == 0 {
		return 0, 0
	}
	return len(in), in[0].Add(w.span).Sub(now)
}

// ceilSeconds rounds d up to whole seconds (at least 1).
func ceilSeconds(d time.Duration) int64 {
	s := int64(math.Ceil(d.Seconds()))
	if s < 1 {
		s = 1
	}
	return s
}

// --- JSON helpers --------------------------------------------------------------------------

// writeJSON answers status with v encoded (HTML characters left as they are).
func writeJSON(w http.ResponseWriter, status int, contentType string, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// shapeError is a body that does not have the platform's shape; pointer is a JSON pointer to the
// offending part.
type shapeError struct {
	pointer string
	msg     string
}

func (e *shapeError) Error() string {
	if e.pointer == "" {
		return e.msg
	}
	return e.pointer + ": " + e.msg
}

func shapef(pointer, format string, args ...any) *shapeError {
	return &shapeError{pointer: pointer, msg: fmt.Sprintf(format, args...)}
}

// jsonKind names the JSON type of raw.
func jsonKind(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	default:
		return "number"
	}
}

// parseDoc parses a whole body as one JSON object (rejecting trailing data and duplicate keys).
func parseDoc(body []byte) (map[string]json.RawMessage, *shapeError) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, shapef("", "empty body, a JSON object is required")
	}
	if !json.Valid(body) {
		return nil, shapef("", "body is not valid JSON")
	}
	return objectAt("", body)
}

// objectAt decodes raw as a JSON object, rejecting duplicate keys.
func objectAt(pointer string, raw json.RawMessage) (map[string]json.RawMessage, *shapeError) {
	if k := jsonKind(raw); k != "object" {
		return nil, shapef(pointer, "must be an object, got %s", k)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // {
		return nil, shapef(pointer, "bad object: %v", err)
	}
	out := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, shapef(pointer, "bad object: %v", err)
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, shapef(pointer, "bad value of %q: %v", key, err)
		}
		if _, dup := out[key]; dup {
			return nil, shapef(pointer, "duplicate key %q", key)
		}
		out[key] = v
	}
	return out, nil
}

// onlyKeys rejects keys not in allowed.
func onlyKeys(pointer string, obj map[string]json.RawMessage, allowed ...string) *shapeError {
	var unknown []string
	for k := range obj {
		found := false
		for _, a := range allowed {
			if k == a {
				found = true
				break
			}
		}
		if !found {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return shapef(pointer, "unknown key(s) %q (allowed: %s)", unknown, strings.Join(allowed, ", "))
	}
	return nil
}

// arrayAt decodes raw as a JSON array.
func arrayAt(pointer string, raw json.RawMessage) ([]json.RawMessage, *shapeError) {
	if k := jsonKind(raw); k != "array" {
		return nil, shapef(pointer, "must be an array, got %s", k)
	}
	var out []json.RawMessage
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, shapef(pointer, "bad array: %v", err)
	}
	return out, nil
}

// stringAt decodes raw as a JSON string.
func stringAt(pointer string, raw json.RawMessage) (string, *shapeError) {
	if k := jsonKind(raw); k != "string" {
		return "", shapef(pointer, "must be a string, got %s", k)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", shapef(pointer, "bad string: %v", err)
	}
	return s, nil
}

// intAt decodes raw as a JSON integer (no fraction or exponent).
func intAt(pointer string, raw json.RawMessage) (int64, *shapeError) {
	if k := jsonKind(raw); k != "number" {
		return 0, shapef(pointer, "must be an integer, got %s", k)
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		return 0, shapef(pointer, "bad number: %v", err)
	}
	v, err := n.Int64()
	if err != nil {
		return 0, shapef(pointer, "must be an integer, got %s", n)
	}
	return v, nil
}

// mediaType is the Content-Type without parameters, lowercased.
func mediaType(r *http.Request) string {
	ct := r.Header.Get("Content-Type")
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return strings.ToLower(strings.TrimSpace(ct))
}

// splitAuth splits an Authorization header into scheme and credentials.
func splitAuth(r *http.Request) (scheme, cred string, present bool) {
	vals := r.Header.Values("Authorization")
	if len(vals) == 0 {
		return "", "", false
	}
	v := vals[0]
	i := strings.IndexByte(v, ' ')
	if i < 0 {
		return v, "", true
	}
	return v[:i], v[i+1:], true
}

// checkScheme is the shared Authorization check: header present, exactly once, with the scheme
// and one non-empty token.
func checkScheme(r *http.Request, wantScheme, key string) (ok, malformed bool, reason string) {
	scheme, cred, present := splitAuth(r)
	switch {
	case !present:
		return false, true, fmt.Sprintf("missing Authorization header (want %q)", wantScheme+" <key>")
	case len(r.Header.Values("Authorization")) > 1:
		return false, true, "more than one Authorization header"
	case scheme != wantScheme:
		return false, true, fmt.Sprintf("Authorization scheme %q, want %q", redactScheme(scheme), wantScheme)
	case cred == "" || strings.TrimSpace(cred) != cred || strings.ContainsAny(cred, " \t"):
		return false, true, fmt.Sprintf("malformed Authorization header: want %q", wantScheme+" <key>")
	case cred != key:
		return false, false, "wrong API key"
	}
	return true, false, ""
}

// redactScheme keeps a scheme printable without echoing what may be a key sent without a scheme.
func redactScheme(s string) string {
	if len(s) > 20 {
		return s[:4] + "…"
	}
	return s
}

// trimSlash drops one trailing slash (the platforms accept both forms).
func trimSlash(p string) string {
	if len(p) > 1 && strings.HasSuffix(p, "/") {
		return p[:len(p)-1]
	}
	return p
}
