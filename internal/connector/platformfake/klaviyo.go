package platformfake

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// KlaviyoLimit is one Klaviyo rate limit as Klaviyo documents it: at most Burst requests in any
// second and at most Steady requests in any minute. In KlaviyoOptions a zero field takes the
// documented default; a negative field disables that bound.
type KlaviyoLimit struct {
	Burst  int // per second
	Steady int // per minute
}

// Documented Klaviyo limits (developers.klaviyo.com API reference, revision 2024-10-15).
var (
	KlaviyoImportJobsLimit = KlaviyoLimit{Burst: 10, Steady: 150} // Bulk Import Profiles, Get Bulk Import Profiles Job
	KlaviyoListsLimit      = KlaviyoLimit{Burst: 10, Steady: 150} // Remove Profiles from List
	KlaviyoProfilesLimit   = KlaviyoLimit{Burst: 75, Steady: 700} // Get Profiles
)

// Klaviyo batch limits.
const (
	KlaviyoMaxImportProfiles = 10000     // profiles per bulk import job
	KlaviyoMaxImportBytes    = 5_000_000 // bulk import payload (5 MB)
	KlaviyoMaxListDelete     = 1000      // profile ids per list relationship delete
	KlaviyoMaxFilterValues   = 100       // values in any(...)
	KlaviyoMaxPageSize       = 100       // page[size]
	klaviyoDefaultPageSize   = 20
)

// KlaviyoOptions configure the Klaviyo fake.
type KlaviyoOptions struct {
	// APIKey is the private key expected in "Authorization: Klaviyo-API-Key <key>".
	APIKey string
	// JobDelay is how long an import job stays unfinished after creation. The first poll after
	// it has elapsed completes the job (and applies it); with 0 the first poll completes it.
	JobDelay time.Duration
	// ImportJobsLimit applies to POST /api/profile-bulk-import-jobs and GET
	// /api/profile-bulk-import-jobs/{id} together (one shared window).
	ImportJobsLimit KlaviyoLimit
	// ListsLimit applies to DELETE /api/lists/{id}/relationships/profiles.
	ListsLimit KlaviyoLimit
	// ProfilesLimit applies to GET /api/profiles.
	ProfilesLimit KlaviyoLimit
	// NoRateLimit turns rate limiting off.
	NoRateLimit bool
	// Now is the clock (rate windows, job delay, timestamps); nil is time.Now.
	Now func() time.Time
}

// Klaviyo is a fake of the Klaviyo API subset Cohort uses: bulk profile import jobs, profile
// lookup by filter and list relationship deletes.
type Klaviyo struct {
	base
	opts     KlaviyoOptions
	limiters map[string]*slidingLimiter

	// state, guarded by base.mu
	profiles map[string]*klaviyoProfile // id ->
	byEmail  map[string]string          // lowercased email -> id
	order    []string                   // profile ids in creation order
	lists    map[string]map[string]bool // list id -> profile ids
	jobs     map[string]*klaviyoJob
	polls    int
	seq      uint64
}

type klaviyoProfile struct {
	id, email, externalID, phone string
}

type klaviyoRow struct {
	email, externalID, phone string
}

type klaviyoJob struct {
	id                 string
	created            time.Time
	started, completed *time.Time
	status             string
	total, done, fail  int
	lists              []string
	rows               []klaviyoRow
}

const (
	klaviyoGroupImport   = "import-jobs"
	klaviyoGroupLists    = "lists"
	klaviyoGroupProfiles = "profiles"
	klaviyoContentType   = "application/vnd.api+json"
)

// NewKlaviyo starts a Klaviyo fake.
func NewKlaviyo(opts KlaviyoOptions) *Klaviyo {
	k := &Klaviyo{
		opts:     opts,
		profiles: map[string]*klaviyoProfile{},
		byEmail:  map[string]string{},
		lists:    map[string]map[string]bool{},
		jobs:     map[string]*klaviyoJob{},
	}
	k.limiters = map[string]*slidingLimiter{
		klaviyoGroupImport:   newKlaviyoLimiter(opts.ImportJobsLimit, KlaviyoImportJobsLimit),
		klaviyoGroupLists:    newKlaviyoLimiter(opts.ListsLimit, KlaviyoListsLimit),
		klaviyoGroupProfiles: newKlaviyoLimiter(opts.ProfilesLimit, KlaviyoProfilesLimit),
	}
	k.start(opts.Now, platformHooks{
		name:       "klaviyo",
		auth:       func(r *http.Request) (bool, bool, string) { return checkScheme(r, "Klaviyo-API-Key", opts.APIKey) },
		preflight:  k.preflight,
		writeError: k.writeError,
		handle:     k.handle,
	})
	return k
}

func newKlaviyoLimiter(l, def KlaviyoLimit) *slidingLimiter {
	if l.Burst == 0 {
		l.Burst = def.Burst
	}
	if l.Steady == 0 {
		l.Steady = def.Steady
	}
	return &slidingLimiter{windows: []window{{limit: l.Burst, span: time.Second}, {limit: l.Steady, span: time.Minute}}}
}

// --- state accessors -----------------------------------------------------------------------

// CreateList makes a list exist (idempotent).
func (k *Klaviyo) CreateList(id string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.lists[id] == nil {
		k.lists[id] = map[string]bool{}
	}
}

// ListMembers returns the e-mails of the list's profiles, sorted.
func (k *Klaviyo) ListMembers(listID string) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := []string{}
	for id := range k.lists[listID] {
		out = append(out, k.profiles[id].email)
	}
	sort.Strings(out)
	return out
}

// ProfileID returns the id of the profile with this e-mail (case-insensitive).
func (k *Klaviyo) ProfileID(email string) (string, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	id, ok := k.byEmail[strings.ToLower(strings.TrimSpace(email))]
	return id, ok
}

// SeedProfile makes a profile with this e-mail exist, on no list, and returns its id (the
// existing one if there is one).
func (k *Klaviyo) SeedProfile(email string) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.upsertLocked(klaviyoRow{email: email}).id
}

// Jobs is how many import jobs were created.
func (k *Klaviyo) Jobs() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.jobs)
}

// JobPolls is how many import job polls (GET) were answered 200.
func (k *Klaviyo) JobPolls() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.polls
}

func (k *Klaviyo) upsertLocked(row klaviyoRow) *klaviyoProfile {
	email := strings.TrimSpace(row.email)
	key := strings.ToLower(email)
	if id, ok := k.byEmail[key]; ok {
		p := k.profiles[id]
		if row.externalID != "" {
			p.externalID = row.externalID
		}
		if row.phone != "" {
			p.phone = row.phone
		}
		return p
	}
	p := &klaviyoProfile{id: k.newIDLocked(), email: email, externalID: row.externalID, phone: row.phone}
	k.profiles[p.id] = p
	k.byEmail[key] = p.id
	k.order = append(k.order, p.id)
	return p
}

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// newIDLocked returns a 26-character ULID-looking id ("01J..."), unique in this fake.
func (k *Klaviyo) newIDLocked() string {
	k.seq++
	var b strings.Builder
	b.WriteString("01J")
	n := k.seq
	for i := 0; i < 10; i++ { // the sequence, 10 base-32 digits, most significant first
		b.WriteByte(crockford[(n>>(5*(9-i)))&31])
	}
	for b.Len() < 26 {
		b.WriteByte(crockford[rand.IntN(32)])
	}
	return b.String()
}

// --- pipeline hooks ------------------------------------------------------------------------

var revisionRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}(\.(pre|beta))?$`)

func (k *Klaviyo) preflight(w http.ResponseWriter, r *http.Request, body []byte) bool {
	rev := r.Header.Get("revision")
	if rev == "" {
		k.violate(r, "missing revision header (e.g. revision: 2024-10-15)")
		k.writeErrorDoc(w, http.StatusBadRequest, klaviyoErr{code: "invalid", title: "Invalid input.", detail: "Missing required header 'revision'.", pointer: "/header/revision"})
		return false
	}
	if _, err := time.Parse("2006-01-02", strings.SplitN(rev, ".", 2)[0]); err != nil || !revisionRE.MatchString(rev) {
		k.violate(r, "malformed revision header %q (want YYYY-MM-DD)", rev)
		k.writeErrorDoc(w, http.StatusBadRequest, klaviyoErr{code: "invalid", title: "Invalid input.", detail: fmt.Sprintf("Invalid revision %q.", rev), pointer: "/header/revision"})
		return false
	}
	if len(body) > 0 {
		if mt := mediaType(r); mt != klaviyoContentType && mt != "application/json" {
			k.violate(r, "Content-Type %q, want %s", r.Header.Get("Content-Type"), klaviyoContentType)
			k.writeErrorDoc(w, http.StatusUnsupportedMediaType, klaviyoErr{code: "unsupported_media_type", title: "Unsupported media type.", detail: fmt.Sprintf("Unsupported media type %q in request.", r.Header.Get("Content-Type"))})
			return false
		}
	}
	return true
}

type klaviyoErr struct {
	code, title, detail, pointer string
}

func klaviyoDefaults(status int) klaviyoErr {
	switch status {
	case http.StatusBadRequest:
		return klaviyoErr{code: "invalid", title: "Invalid input.", detail: "Invalid input."}
	case http.StatusUnauthorized:
		return klaviyoErr{code: "not_authenticated", title: "Authentication credentials were not provided.", detail: "Missing or invalid private key."}
	case http.StatusForbidden:
		return klaviyoErr{code: "permission_denied", title: "You do not have permission to perform this action.", detail: "You do not have permission to perform this action."}
	case http.StatusNotFound:
		return klaviyoErr{code: "not_found", title: "Not found.", detail: "Not found."}
	case http.StatusMethodNotAllowed:
		return klaviyoErr{code: "method_not_allowed", title: "Method not allowed.", detail: "Method not allowed."}
	case http.StatusConflict:
		return klaviyoErr{code: "conflict", title: "Conflict.", detail: "Conflict."}
	case http.StatusRequestEntityTooLarge:
		return klaviyoErr{code: "request_too_large", title: "Request too large.", detail: "Request payload too large."}
	case http.StatusUnsupportedMediaType:
		return klaviyoErr{code: "unsupported_media_type", title: "Unsupported media type.", detail: "Unsupported media type."}
	case http.StatusTooManyRequests:
		return klaviyoErr{code: "throttled", title: "Request was throttled.", detail: "Request was throttled. Expected available in 1 second."}
	case http.StatusServiceUnavailable:
		return klaviyoErr{code: "service_unavailable", title: "Service unavailable.", detail: "Service temporarily unavailable, try again later."}
	default:
		if status >= 500 {
			return klaviyoErr{code: "error", title: "A server error occurred.", detail: "A server error occurred."}
		}
		t := http.StatusText(status)
		return klaviyoErr{code: "error", title: t + ".", detail: t + "."}
	}
}

// writeError is the pipeline's error writer: a JSON:API error document, Retry-After on 429.
func (k *Klaviyo) writeError(w http.ResponseWriter, status int, msg string, retryAfter time.Duration, _ bool) {
	e := klaviyoDefaults(status)
	if status == http.StatusTooManyRequests {
		secs := ceilSeconds(retryAfter)
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
		e.detail = throttledDetail(secs)
	}
	if msg != "" {
		e.detail = msg
	}
	k.writeErrorDoc(w, status, e)
}

func throttledDetail(secs int64) string {
	unit := "seconds"
	if secs == 1 {
		unit = "second"
	}
	return fmt.Sprintf("Request was throttled. Expected available in %d %s.", secs, unit)
}

func (k *Klaviyo) writeErrorDoc(w http.ResponseWriter, status int, e klaviyoErr) {
	if e.pointer == "" {
		e.pointer = "/data/"
	}
	writeJSON(w, status, klaviyoContentType, map[string]any{"errors": []any{map[string]any{
		"id":     fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", rand.Uint32(), rand.Uint32()&0xffff, 0x4000|rand.Uint32()&0x0fff, 0x8000|rand.Uint32()&0x3fff, rand.Uint64()&0xffffffffffff),
		"status": status,
		"code":   e.code,
		"title":  e.title,
		"detail": e.detail,
		"source": map[string]any{"pointer": e.pointer},
		"links":  map[string]any{},
		"meta":   map[string]any{},
	}}})
}

// badRequest records a violation and answers 400 with the shape error.
func (k *Klaviyo) badRequest(w http.ResponseWriter, r *http.Request, se *shapeError) {
	k.violate(r, "%s", se.Error())
	ptr := se.pointer
	if ptr == "" {
		ptr = "/data/"
	}
	k.writeErrorDoc(w, http.StatusBadRequest, klaviyoErr{code: "invalid", title: "Invalid input.", detail: se.msg, pointer: ptr})
}

func (k *Klaviyo) handle(w http.ResponseWriter, r *http.Request, body []byte) {
	path := trimSlash(r.URL.Path)
	const jobsPath = "/api/profile-bulk-import-jobs"
	var (
		group   string
		method  string
		serveFn func()
	)
	switch {
	case path == jobsPath:
		group, method = klaviyoGroupImport, http.MethodPost
		serveFn = func() { k.createJob(w, r, body) }
	case strings.HasPrefix(path, jobsPath+"/") && !strings.Contains(path[len(jobsPath)+1:], "/"):
		id := path[len(jobsPath)+1:]
		group, method = klaviyoGroupImport, http.MethodGet
		serveFn = func() { k.getJob(w, r, id) }
	case path == "/api/profiles":
		group, method = klaviyoGroupProfiles, http.MethodGet
		serveFn = func() { k.getProfiles(w, r) }
	case strings.HasPrefix(path, "/api/lists/") && strings.HasSuffix(path, "/relationships/profiles"):
		id := strings.TrimSuffix(strings.TrimPrefix(path, "/api/lists/"), "/relationships/profiles")
		if id == "" || strings.Contains(id, "/") {
			k.writeError(w, http.StatusNotFound, "", 0, false)
			return
		}
		group, method = klaviyoGroupLists, http.MethodDelete
		serveFn = func() { k.removeFromList(w, r, id, body) }
	default:
		k.writeError(w, http.StatusNotFound, fmt.Sprintf("No endpoint %s %s in this fake.", r.Method, r.URL.Path), 0, false)
		return
	}
	if r.Method != method {
		w.Header().Set("Allow", method)
		k.writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("Method %q not allowed.", r.Method), 0, false)
		return
	}
	if !k.rateLimit(w, r, group) {
		return
	}
	serveFn()
}

// rateLimit admits the request in group's windows or answers 429 (and records a violation).
func (k *Klaviyo) rateLimit(w http.ResponseWriter, r *http.Request, group string) bool {
	if k.opts.NoRateLimit {
		return true
	}
	k.mu.Lock()
	lim := k.limiters[group]
	now := k.now()
	ok, win, wait := lim.admit(now)
	if !ok {
		k.violateLocked(r, "rate limit exceeded: more than %d requests in %s on %s", win.limit, win.span, group)
		k.mu.Unlock()
		k.writeError(w, http.StatusTooManyRequests, "", wait, false)
		return false
	}
	// Klaviyo reports the steady window on every non-429 answer.
	steady := lim.windows[1]
	if steady.limit > 0 {
		n, reset := lim.usage(now, steady)
		w.Header().Set("RateLimit-Limit", strconv.Itoa(steady.limit))
		w.Header().Set("RateLimit-Remaining", strconv.Itoa(max(0, steady.limit-n)))
		w.Header().Set("RateLimit-Reset", strconv.FormatInt(ceilSeconds(reset), 10))
	}
	k.mu.Unlock()
	return true
}

// --- bulk import jobs ----------------------------------------------------------------------

var klaviyoProfileAttributes = []string{
	"email", "phone_number", "external_id", "anonymous_id", "_kx", "first_name", "last_name",
	"organization", "locale", "title", "image", "location", "properties",
}

// optString reads an optional string attribute (absent or null is "").
func optString(pointer string, obj map[string]json.RawMessage, key string) (string, *shapeError) {
	raw, ok := obj[key]
	if !ok || jsonKind(raw) == "null" {
		return "", nil
	}
	return stringAt(pointer+"/"+key, raw)
}

func (k *Klaviyo) createJob(w http.ResponseWriter, r *http.Request, body []byte) {
	if len(body) > KlaviyoMaxImportBytes {
		k.violate(r, "bulk import payload of %d bytes, Klaviyo takes at most %d", len(body), KlaviyoMaxImportBytes)
		k.writeErrorDoc(w, http.StatusRequestEntityTooLarge, klaviyoErr{code: "request_too_large", title: "Request too large.", detail: fmt.Sprintf("Payload may not exceed %d bytes.", KlaviyoMaxImportBytes)})
		return
	}
	rows, lists, se := parseImportJob(body)
	if se != nil {
		k.badRequest(w, r, se)
		return
	}
	k.mu.Lock()
	for _, l := range lists {
		if k.lists[l] == nil {
			k.mu.Unlock()
			k.writeErrorDoc(w, http.StatusNotFound, klaviyoErr{code: "not_found", title: "Not found.", detail: fmt.Sprintf("A list with id %s does not exist.", l), pointer: "/data/relationships/lists/data"})
			return
		}
	}
	job := &klaviyoJob{id: k.newIDLocked(), created: k.now(), status: "queued", total: len(rows), lists: lists, rows: rows}
	k.jobs[job.id] = job
	doc := k.jobDocLocked(job)
	k.mu.Unlock()
	writeJSON(w, http.StatusAccepted, klaviyoContentType, doc)
}

// parseImportJob validates a Bulk Import Profiles body and returns its rows and list ids.
func parseImportJob(body []byte) ([]klaviyoRow, []string, *shapeError) {
	doc, se := parseDoc(body)
	if se != nil {
		return nil, nil, se
	}
	if se := onlyKeys("", doc, "data"); se != nil {
		return nil, nil, se
	}
	rawData, ok := doc["data"]
	if !ok {
		return nil, nil, shapef("/data", "required")
	}
	data, se := objectAt("/data", rawData)
	if se != nil {
		return nil, nil, se
	}
	if se := onlyKeys("/data", data, "type", "attributes", "relationships"); se != nil {
		return nil, nil, se
	}
	if se := wantType("/data", data, "profile-bulk-import-job"); se != nil {
		return nil, nil, se
	}
	rawAttrs, ok := data["attributes"]
	if !ok {
		return nil, nil, shapef("/data/attributes", "required")
	}
	attrs, se := objectAt("/data/attributes", rawAttrs)
	if se != nil {
		return nil, nil, se
	}
	if se := onlyKeys("/data/attributes", attrs, "profiles"); se != nil {
		return nil, nil, se
	}
	rawProfiles, ok := attrs["profiles"]
	if !ok {
		return nil, nil, shapef("/data/attributes/profiles", "required")
	}
	profiles, se := objectAt("/data/attributes/profiles", rawProfiles)
	if se != nil {
		return nil, nil, se
	}
	if se := onlyKeys("/data/attributes/profiles", profiles, "data"); se != nil {
		return nil, nil, se
	}
	rawItems, ok := profiles["data"]
	if !ok {
		return nil, nil, shapef("/data/attributes/profiles/data", "required")
	}
	items, se := arrayAt("/data/attributes/profiles/data", rawItems)
	if se != nil {
		return nil, nil, se
	}
	switch {
	case len(items) == 0:
		return nil, nil, shapef("/data/attributes/profiles/data", "at least one profile is required")
	case len(items) > KlaviyoMaxImportProfiles:
		return nil, nil, shapef("/data/attributes/profiles/data", "%d profiles, at most %d per job", len(items), KlaviyoMaxImportProfiles)
	}
	rows := make([]klaviyoRow, len(items))
	for i, raw := range items {
		ptr := fmt.Sprintf("/data/attributes/profiles/data/%d", i)
		item, se := objectAt(ptr, raw)
		if se != nil {
			return nil, nil, se
		}
		if se := onlyKeys(ptr, item, "type", "id", "attributes"); se != nil {
			return nil, nil, se
		}
		if se := wantType(ptr, item, "profile"); se != nil {
			return nil, nil, se
		}
		if raw, ok := item["id"]; ok && jsonKind(raw) != "null" {
			if _, se := stringAt(ptr+"/id", raw); se != nil {
				return nil, nil, se
			}
		}
		rawPA, ok := item["attributes"]
		if !ok {
			return nil, nil, shapef(ptr+"/attributes", "required")
		}
		pa, se := objectAt(ptr+"/attributes", rawPA)
		if se != nil {
			return nil, nil, se
		}
		if se := onlyKeys(ptr+"/attributes", pa, klaviyoProfileAttributes...); se != nil {
			return nil, nil, se
		}
		if raw, ok := pa["properties"]; ok && jsonKind(raw) != "null" {
			if _, se := objectAt(ptr+"/attributes/properties", raw); se != nil {
				return nil, nil, se
			}
		}
		var row klaviyoRow
		if row.email, se = optString(ptr+"/attributes", pa, "email"); se != nil {
			return nil, nil, se
		}
		if row.externalID, se = optString(ptr+"/attributes", pa, "external_id"); se != nil {
			return nil, nil, se
		}
		if row.phone, se = optString(ptr+"/attributes", pa, "phone_number"); se != nil {
			return nil, nil, se
		}
		rows[i] = row
	}
	var lists []string
	if rawRel, ok := data["relationships"]; ok {
		rel, se := objectAt("/data/relationships", rawRel)
		if se != nil {
			return nil, nil, se
		}
		if se := onlyKeys("/data/relationships", rel, "lists"); se != nil {
			return nil, nil, se
		}
		if rawLists, ok := rel["lists"]; ok {
			ls, se := objectAt("/data/relationships/lists", rawLists)
			if se != nil {
				return nil, nil, se
			}
			if se := onlyKeys("/data/relationships/lists", ls, "data"); se != nil {
				return nil, nil, se
			}
			rawLD, ok := ls["data"]
			if !ok {
				return nil, nil, shapef("/data/relationships/lists/data", "required")
			}
			lds, se := arrayAt("/data/relationships/lists/data", rawLD)
			if se != nil {
				return nil, nil, se
			}
			for i, raw := range lds {
				id, se := resourceID(fmt.Sprintf("/data/relationships/lists/data/%d", i), raw, "list")
				if se != nil {
					return nil, nil, se
				}
				lists = append(lists, id)
			}
		}
	}
	return rows, lists, nil
}

// wantType checks a resource object's "type".
func wantType(pointer string, obj map[string]json.RawMessage, want string) *shapeError {
	raw, ok := obj["type"]
	if !ok {
		return shapef(pointer+"/type", "required (want %q)", want)
	}
	got, se := stringAt(pointer+"/type", raw)
	if se != nil {
		return se
	}
	if got != want {
		return shapef(pointer+"/type", "type %q, want %q", got, want)
	}
	return nil
}

// resourceID validates a resource identifier {"type": want, "id": "..."} and returns the id.
func resourceID(pointer string, raw json.RawMessage, want string) (string, *shapeError) {
	obj, se := objectAt(pointer, raw)
	if se != nil {
		return "", se
	}
	if se := onlyKeys(pointer, obj, "type", "id"); se != nil {
		return "", se
	}
	if se := wantType(pointer, obj, want); se != nil {
		return "", se
	}
	rawID, ok := obj["id"]
	if !ok {
		return "", shapef(pointer+"/id", "required")
	}
	id, se := stringAt(pointer+"/id", rawID)
	if se != nil {
		return "", se
	}
	if strings.TrimSpace(id) == "" {
		return "", shapef(pointer+"/id", "must not be empty")
	}
	return id, nil
}

func (k *Klaviyo) getJob(w http.ResponseWriter, r *http.Request, id string) {
	if len(r.URL.Query()) > 0 {
		for key := range r.URL.Query() {
			if key != "fields[profile-bulk-import-job]" && key != "include" && key != "fields[list]" {
				k.violate(r, "unknown query parameter %q", key)
				k.writeErrorDoc(w, http.StatusBadRequest, klaviyoErr{code: "invalid", title: "Invalid input.", detail: fmt.Sprintf("'%s' is not a valid query parameter.", key), pointer: "/query/" + key})
				return
			}
		}
	}
	k.mu.Lock()
	job, ok := k.jobs[id]
	if !ok {
		k.mu.Unlock()
		k.writeErrorDoc(w, http.StatusNotFound, klaviyoErr{code: "not_found", title: "Not found.", detail: fmt.Sprintf("A bulk import job with id %s does not exist.", id)})
		return
	}
	k.polls++
	now := k.now()
	if job.status != "complete" {
		if now.Sub(job.created) >= k.opts.JobDelay {
			k.completeLocked(job, now)
		} else if job.started == nil {
			t := now
			job.started = &t
			job.status = "processing"
		}
	}
	doc := k.jobDocLocked(job)
	k.mu.Unlock()
	writeJSON(w, http.StatusOK, klaviyoContentType, doc)
}

// completeLocked applies the job: upserts each row with an e-mail and adds it to the lists.
func (k *Klaviyo) completeLocked(job *klaviyoJob, now time.Time) {
	if job.started == nil {
		t := now
		job.started = &t
	}
	for _, row := range job.rows {
		if !strings.Contains(row.email, "@") {
			job.fail++
			continue
		}
		p := k.upsertLocked(row)
		for _, l := range job.lists {
			if k.lists[l] == nil { // created before the job, but be safe
				k.lists[l] = map[string]bool{}
			}
			k.lists[l][p.id] = true
		}
		job.done++
	}
	t := now
	job.completed = &t
	job.status = "complete"
	job.rows = nil
}

func klaviyoTime(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000000+00:00")
}

func klaviyoTimePtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return klaviyoTime(*t)
}

func (k *Klaviyo) jobDocLocked(job *klaviyoJob) map[string]any {
	self := k.URL() + "/api/profile-bulk-import-jobs/" + job.id + "/"
	lists := make([]any, len(job.lists))
	for i, l := range job.lists {
		lists[i] = map[string]any{"type": "list", "id": l}
	}
	return map[string]any{"data": map[string]any{
		"type": "profile-bulk-import-job",
		"id":   job.id,
		"attributes": map[string]any{
			"status":          job.status,
			"created_at":      klaviyoTime(job.created),
			"total_count":     job.total,
			"completed_count": job.done,
			"failed_count":    job.fail,
			"completed_at":    klaviyoTimePtr(job.completed),
			"expires_at":      klaviyoTime(job.created.Add(7 * 24 * time.Hour)),
			"started_at":      klaviyoTimePtr(job.started),
		},
		"relationships": map[string]any{
			"lists": map[string]any{
				"data":  lists,
				"links": map[string]any{"self": self + "relationships/lists/", "related": self + "lists/"},
			},
			"profiles": map[string]any{
				"links": map[string]any{"self": self + "relationships/profiles/", "related": self + "profiles/"},
			},
			"import-errors": map[string]any{
				"links": map[string]any{"self": self + "relationships/import-errors/", "related": self + "import-errors/"},
			},
		},
		"links": map[string]any{"self": self},
	}}
}

// --- profiles ------------------------------------------------------------------------------

var klaviyoProfilesQuery = map[string]bool{
	"filter": true, "page[size]": true, "page[cursor]": true, "fields[profile]": true,
	"additional-fields[profile]": true, "sort": true,
}

var klaviyoFilterFields = map[string]bool{"email": true, "id": true, "external_id": true, "phone_number": true}

func (k *Klaviyo) getProfiles(w http.ResponseWriter, r *http.Request) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		k.badRequest(w, r, shapef("/query", "unparsable query: %v", err))
		return
	}
	for key, vals := range q {
		if !klaviyoProfilesQuery[key] {
			k.badRequest(w, r, shapef("/query/"+key, "'%s' is not a valid query parameter", key))
			return
		}
		if len(vals) > 1 {
			k.badRequest(w, r, shapef("/query/"+key, "'%s' given %d times", key, len(vals)))
			return
		}
	}
	size := klaviyoDefaultPageSize
	if v := q.Get("page[size]"); v != "" || q.Has("page[size]") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > KlaviyoMaxPageSize {
			k.badRequest(w, r, shapef("/query/page[size]", "page[size] %q must be an integer from 1 to %d", v, KlaviyoMaxPageSize))
			return
		}
		size = n
	}
	offset := 0
	if q.Has("page[cursor]") {
		n, ok := decodeCursor(q.Get("page[cursor]"))
		if !ok {
			k.badRequest(w, r, shapef("/query/page[cursor]", "invalid cursor %q", q.Get("page[cursor]")))
			return
		}
		offset = n
	}
	fields := map[string]bool{"email": true, "phone_number": true, "external_id": true}
	if q.Has("fields[profile]") {
		fields = map[string]bool{}
		for _, f := range strings.Split(q.Get("fields[profile]"), ",") {
			f = strings.TrimSpace(f)
			ok := false
			for _, a := range klaviyoProfileAttributes {
				if f == a {
					ok = true
				}
			}
			if !ok {
				k.badRequest(w, r, shapef("/query/fields[profile]", "'%s' is not a valid field for the resource 'profile'", f))
				return
			}
			fields[f] = true
		}
	}
	var conds []klaviyoCond
	if q.Has("filter") {
		conds, err = parseKlaviyoFilter(q.Get("filter"))
		if err != nil {
			k.badRequest(w, r, shapef("/query/filter", "invalid filter: %v", err))
			return
		}
		for _, c := range conds {
			if !klaviyoFilterFields[c.field] {
				k.badRequest(w, r, shapef("/query/filter", "filtering on '%s' is not supported by this fake (email, id, external_id, phone_number)", c.field))
				return
			}
			switch c.op {
			case "equals":
				if c.list {
					k.badRequest(w, r, shapef("/query/filter", "equals(%s,...) takes one value, not a list", c.field))
					return
				}
			case "any":
				if !c.list {
					k.badRequest(w, r, shapef("/query/filter", "any(%s,...) takes a list of values", c.field))
					return
				}
				if len(c.values) > KlaviyoMaxFilterValues {
					k.badRequest(w, r, shapef("/query/filter", "any(%s,...) has %d values, at most %d", c.field, len(c.values), KlaviyoMaxFilterValues))
					return
				}
			default:
				k.badRequest(w, r, shapef("/query/filter", "operator '%s' is not supported for '%s' (equals, any)", c.op, c.field))
				return
			}
		}
	}

	k.mu.Lock()
	var match []*klaviyoProfile
	for _, id := range k.order {
		p := k.profiles[id]
		if p.matches(conds) {
			match = append(match, p)
		}
	}
	k.mu.Unlock()

	page := []any{}
	end := min(offset+size, len(match))
	for _, p := range match[min(offset, len(match)):end] {
		attrs := map[string]any{}
		set := func(name, v string) {
			if fields[name] {
				if v == "" {
					attrs[name] = nil
				} else {
					attrs[name] = v
				}
			}
		}
		set("email", p.email)
		set("phone_number", p.phone)
		set("external_id", p.externalID)
		page = append(page, map[string]any{
			"type":       "profile",
			"id":         p.id,
			"attributes": attrs,
			"links":      map[string]any{"self": k.URL() + "/api/profiles/" + p.id + "/"},
		})
	}
	pageURL := func(off int) string {
		qq, _ := url.ParseQuery(r.URL.RawQuery)
		qq.Set("page[cursor]", encodeCursor(off))
		return k.URL() + r.URL.Path + "?" + qq.Encode()
	}
	var next, prev any
	if end < len(match) {
		next = pageURL(end)
	}
	if offset > 0 {
		prev = pageURL(max(0, offset-size))
	}
	writeJSON(w, http.StatusOK, klaviyoContentType, map[string]any{
		"data":  page,
		"links": map[string]any{"self": k.URL() + r.URL.RequestURI(), "next": next, "prev": prev},
	})
}

func encodeCursor(off int) string {
	return base64.RawURLEncoding.EncodeToString([]byte("offset:" + strconv.Itoa(off)))
}

func decodeCursor(s string) (int, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || !strings.HasPrefix(string(b), "offset:") {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimPrefix(string(b), "offset:"))
	return n, err == nil && n >= 0
}

func (p *klaviyoProfile) matches(conds []klaviyoCond) bool {
	for _, c := range conds {
		var v string
		switch c.field {
		case "email":
			v = p.email
		case "id":
			v = p.id
		case "external_id":
			v = p.externalID
		case "phone_number":
			v = p.phone
		}
		found := false
		for _, want := range c.values {
			if v != "" && (v == want || c.field == "email" && strings.EqualFold(v, want)) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// klaviyoCond is one filter condition: op(field,value) or op(field,[values]).
type klaviyoCond struct {
	op, field string
	values    []string
	list      bool
}

// parseKlaviyoFilter parses Klaviyo's filter syntax: comma-separated conditions (ANDed) of the
// form op(field,"value") or op(field,["v1","v2"]), strings in double (or single) quotes with
// backslash escapes.
func parseKlaviyoFilter(s string) ([]klaviyoCond, error) {
	p := &filterParser{s: s}
	var out []klaviyoCond
	for {
		p.space()
		c, err := p.cond()
		if err != nil {
			return nil, err
		}
		out = append(out, c)
		p.space()
		if p.eof() {
			return out, nil
		}
		if err := p.expect(','); err != nil {
			return nil, err
		}
	}
}

type filterParser struct {
	s string
	i int
}

func (p *filterParser) eof() bool { return p.i >= len(p.s) }

func (p *filterParser) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *filterParser) expect(c byte) error {
	p.space()
	if p.eof() {
		return fmt.Errorf("expected %q at end of filter", c)
	}
	if p.s[p.i] != c {
		return fmt.Errorf("expected %q at offset %d, found %q", c, p.i, p.s[p.i])
	}
	p.i++
	return nil
}

func (p *filterParser) ident() (string, error) {
	p.space()
	start := p.i
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == '$' {
			p.i++
			continue
		}
		break
	}
	if p.i == start {
		if p.eof() {
			return "", fmt.Errorf("expected a name at end of filter")
		}
		return "", fmt.Errorf("expected a name at offset %d, found %q", p.i, p.s[p.i])
	}
	return p.s[start:p.i], nil
}

func (p *filterParser) cond() (klaviyoCond, error) {
	var c klaviyoCond
	var err error
	if c.op, err = p.ident(); err != nil {
		return c, err
	}
	if err := p.expect('('); err != nil {
		return c, err
	}
	if c.field, err = p.ident(); err != nil {
		return c, err
	}
	if err := p.expect(','); err != nil {
		return c, err
	}
	p.space()
	if !p.eof() && p.s[p.i] == '[' {
		p.i++
		c.list = true
		p.space()
		if !p.eof() && p.s[p.i] == ']' {
			p.i++
			return c, fmt.Errorf("empty list in %s(%s,[])", c.op, c.field)
		}
		for {
			v, err := p.str()
			if err != nil {
				return c, err
			}
			c.values = append(c.values, v)
			p.space()
			if !p.eof() && p.s[p.i] == ',' {
				p.i++
				continue
			}
			if err := p.expect(']'); err != nil {
				return c, err
			}
			break
		}
	} else {
		v, err := p.str()
		if err != nil {
			return c, err
		}
		c.values = []string{v}
	}
	if err := p.expect(')'); err != nil {
		return c, err
	}
	return c, nil
}

// str reads one quoted string.
func (p *filterParser) str() (string, error) {
	p.space()
	if p.eof() {
		return "", fmt.Errorf("expected a quoted string at end of filter")
	}
	q := p.s[p.i]
	if q != '"' && q != '\'' {
		return "", fmt.Errorf("expected a quoted string at offset %d, found %q", p.i, q)
	}
	p.i++
	var b strings.Builder
	for {
		if p.eof() {
			return "", fmt.Errorf("unterminated string")
		}
		c := p.s[p.i]
		p.i++
		switch {
		case c == q:
			return b.String(), nil
		case c == '\\':
			if p.eof() {
				return "", fmt.Errorf("unterminated escape")
			}
			e := p.s[p.i]
			p.i++
			switch e {
			case '"', '\'', '\\', '/':
				b.WriteByte(e)
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'u':
				if p.i+4 > len(p.s) {
					return "", fmt.Errorf("short \\u escape")
				}
				n, err := strconv.ParseUint(p.s[p.i:p.i+4], 16, 16)
				if err != nil {
					return "", fmt.Errorf("bad \\u escape %q", p.s[p.i:p.i+4])
				}
				p.i += 4
				b.WriteRune(rune(n))
			default:
				return "", fmt.Errorf("unknown escape \\%c", e)
			}
		default:
			b.WriteByte(c)
		}
	}
}

// --- list relationships --------------------------------------------------------------------

func (k *Klaviyo) removeFromList(w http.ResponseWriter, r *http.Request, listID string, body []byte) {
	ids, se := parseRelationshipIDs(body, "profile", KlaviyoMaxListDelete)
	if se != nil {
		k.badRequest(w, r, se)
		return
	}
	k.mu.Lock()
	members := k.lists[listID]
	if members == nil {
		k.mu.Unlock()
		k.writeErrorDoc(w, http.StatusNotFound, klaviyoErr{code: "not_found", title: "Not found.", detail: fmt.Sprintf("A list with id %s does not exist.", listID)})
		return
	}
	for _, id := range ids {
		delete(members, id)
	}
	k.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// parseRelationshipIDs validates {"data":[{"type":typ,"id":"..."}, ...]} with 1..limit items.
func parseRelationshipIDs(body []byte, typ string, limit int) ([]string, *shapeError) {
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
	items, se := arrayAt("/data", raw)
	if se != nil {
		return nil, se
	}
	switch {
	case len(items) == 0:
		return nil, shapef("/data", "at least one %s is required", typ)
	case len(items) > limit:
		return nil, shapef("/data", "%d %ss, at most %d per request", len(items), typ, limit)
	}
	ids := make([]string, len(items))
	for i, raw := range items {
		id, se := resourceID(fmt.Sprintf("/data/%d", i), raw, typ)
		if se != nil {
			return nil, se
		}
		ids[i] = id
	}
	return ids, nil
}
