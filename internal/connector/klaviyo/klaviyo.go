// Package klaviyo is the Klaviyo activation adapter. Klaviyo list membership takes profile ids,
// not e-mails: adds go through the Bulk Import Profiles API (one job of up to 10,000 profiles by
// e-mail, with the list as relationship, polled until complete); removes resolve unknown profile
// ids by e-mail (GET /api/profiles with an any(email,[...]) filter) and delete the list
// relationships in chunks of 1,000 ids. Every request carries the revision header and
// "Authorization: Klaviyo-API-Key <key>", and waits on the connector's token buckets set to
// Klaviyo's published limits.
package klaviyo

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/mail"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cohort-dev/cohort/internal/connector/platform"
)

// Revision is the API revision the adapter speaks.
const Revision = "2024-10-15"

// DefaultBaseURL is Klaviyo's API host (COHORT_KLAVIYO_API_URL overrides it).
const DefaultBaseURL = "https://a.klaviyo.com"

// Batch sizes Klaviyo allows.
const (
	ImportJobSize   = 10000 // profiles per bulk import job
	ListDeleteSize  = 1000  // profile ids per list relationship delete
	ProfileLookupSz = 100   // e-mails per any(email,[...]) lookup (page[size] max)
)

// Rate limits Klaviyo publishes for the endpoints used (burst per second, steady per minute).
var (
	LimitImportJobs = platform.Limit{Burst: 10, Steady: 150}
	LimitLists      = platform.Limit{Burst: 10, Steady: 150}
	LimitProfiles   = platform.Limit{Burst: 75, Steady: 700}
)

// Endpoint groups (each with its own bucket).
const (
	groupImport   = "import"
	groupLists    = "lists"
	groupProfiles = "profiles"
)

// Config is one connector's Klaviyo settings.
type Config struct {
	BaseURL string
	ListID  string
	APIKey  string
}

// Options tune the adapter (tests shorten the polling).
type Options struct {
	// PollInterval is the first wait before polling an import job (doubles up to PollMax).
	PollInterval time.Duration
	PollMax      time.Duration
	// JobTimeout bounds how long one import job is polled.
	JobTimeout time.Duration
}

// Adapter pushes one connector's changes to Klaviyo.
type Adapter struct {
	cfg    Config
	opts   Options
	caller *platform.Caller
}

// New returns the adapter of cfg. limiter gives the connector's bucket per endpoint group.
func New(cfg Config, hc *http.Client, limiter func(group string, l platform.Limit) *platform.Limiter, opts Options, permanent ...error) *Adapter {
	if opts.PollInterval <= 0 {
		opts.PollInterval = 500 * time.Millisecond
	}
	if opts.PollMax <= 0 {
		opts.PollMax = 10 * time.Second
	}
	if opts.JobTimeout <= 0 {
		opts.JobTimeout = 30 * time.Minute
	}
	cfg.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	a := &Adapter{cfg: cfg, opts: opts}
	a.caller = &platform.Caller{
		Platform: "klaviyo",
		HTTP:     hc,
		Limiter: func(group string) *platform.Limiter {
			switch group {
			case groupImport:
				return limiter(group, LimitImportJobs)
			case groupProfiles:
				return limiter(group, LimitProfiles)
			default:
				return limiter(groupLists, LimitLists)
			}
		},
		Header: func(h http.Header) {
			h.Set("Authorization", "Klaviyo-API-Key "+cfg.APIKey)
			h.Set("revision", Revision)
			h.Set("Accept", "application/vnd.api+json")
			h.Set("Content-Type", "application/vnd.api+json")
		},
		Message:                errorMessage,
		Secrets:                []string{cfg.APIKey},
		PermanentNetworkErrors: permanent,
	}
	return a
}

// AddChunk is one import job.
func (a *Adapter) AddChunk() int { return ImportJobSize }

// RemoveChunk is one list relationship delete.
func (a *Adapter) RemoveChunk() int { return ListDeleteSize }

type resource struct {
	Type       string         `json:"type"`
	ID         string         `json:"id,omitempty"`
	Attributes map[string]any `json:"attributes,omitempty"`
}

type jobAttributes struct {
	Status         string `json:"status"`
	TotalCount     int    `json:"total_count"`
	CompletedCount *int   `json:"completed_count"`
	FailedCount    *int   `json:"failed_count"`
}

type jobDoc struct {
	Data struct {
		ID         string        `json:"id"`
		Attributes jobAttributes `json:"attributes"`
	} `json:"data"`
}

// Add imports the members with an e-mail into the list in one bulk import job and waits for it.
// Members without a valid e-mail are skipped. Importing is an upsert, so a retried job does not
// double-apply.
func (a *Adapter) Add(ctx context.Context, members []platform.Member) (platform.Outcome, error) {
	var out platform.Outcome
	profiles := make([]resource, 0, len(members))
	for _, m := range members {
		if !validEmail(m.Email) {
			out.Skipped++
			continue
		}
		profiles = append(profiles, resource{Type: "profile", Attributes: map[string]any{"email": m.Email, "external_id": m.UserID}})
		out.Done = append(out.Done, m)
	}
	if len(profiles) == 0 {
		return out, nil
	}
	body, err := json.Marshal(map[string]any{"data": map[string]any{
		"type":       "profile-bulk-import-job",
		"attributes": map[string]any{"profiles": map[string]any{"data": profiles}},
		"relationships": map[string]any{"lists": map[string]any{"data": []resource{
			{Type: "list", ID: a.cfg.ListID},
		}}},
	}})
	if err != nil {
		return platform.Outcome{}, err
	}
	_, data, err := a.caller.Do(ctx, groupImport, http.MethodPost, a.cfg.BaseURL+"/api/profile-bulk-import-jobs", body, 1<<20)
	if err != nil {
		return platform.Outcome{}, err
	}
	var job jobDoc
	if err := json.Unmarshal(data, &job); err != nil || job.Data.ID == "" {
		return platform.Outcome{}, &platform.Error{Platform: "klaviyo", Status: 202, Message: "import job answer without a job id", Retryable: true}
	}
	final, err := a.wait(ctx, job.Data.ID)
	if err != nil {
		return platform.Outcome{}, err
	}
	if final.FailedCount != nil && *final.FailedCount > 0 {
		// Klaviyo counts rows it could not import without saying which here; they were all valid
		// e-mails, so they are recorded as sent and counted as failed.
		out.Failed = *final.FailedCount
	}
	return out, nil
}

// wait polls the import job until it is complete (or cancelled), backing off between polls.
func (a *Adapter) wait(ctx context.Context, id string) (jobAttributes, error) {
	deadline := time.Now().Add(a.opts.JobTimeout)
	delay := a.opts.PollInterval
	for {
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return jobAttributes{}, ctx.Err()
		case <-t.C:
		}
		_, data, err := a.caller.Do(ctx, groupImport, http.MethodGet, a.cfg.BaseURL+"/api/profile-bulk-import-jobs/"+url.PathEscape(id), nil, 1<<20)
		if err != nil {
			return jobAttributes{}, err
		}
		var job jobDoc
		if err := json.Unmarshal(data, &job); err != nil {
			return jobAttributes{}, &platform.Error{Platform: "klaviyo", Status: 200, Message: "unreadable import job: " + err.Error(), Retryable: true}
		}
		switch job.Data.Attributes.Status {
		case "complete":
			return job.Data.Attributes, nil
		case "cancelled":
			return jobAttributes{}, &platform.Error{Platform: "klaviyo", Status: 200, Message: "import job " + id + " was cancelled"}
		}
		if time.Now().After(deadline) {
			return jobAttributes{}, &platform.Error{Platform: "klaviyo", Message: fmt.Sprintf("import job %s not complete after %s", id, a.opts.JobTimeout), Retryable: true}
		}
		delay = min(2*delay, a.opts.PollMax)
	}
}

// Remove deletes the members' profiles from the list. Profile ids not known yet are looked up by
// e-mail (and returned in Done so they are kept); members Klaviyo has no profile for are not on
// the list and count as skipped. Deleting a relationship twice is harmless.
func (a *Adapter) Remove(ctx context.Context, members []platform.Member) (platform.Outcome, error) {
	var out platform.Outcome
	var lookup []string
	byEmail := map[string][]int{}
	for i, m := range members {
		if m.PlatformID == "" {
			if !validEmail(m.Email) {
				out.Skipped++
				continue
			}
			key := strings.ToLower(m.Email)
			if _, seen := byEmail[key]; !seen {
				lookup = append(lookup, m.Email)
			}
			byEmail[key] = append(byEmail[key], i)
		}
	}
	resolved := make([]platform.Member, len(members))
	copy(resolved, members)
	for start := 0; start < len(lookup); start += ProfileLookupSz {
		found, err := a.lookup(ctx, lookup[start:min(start+ProfileLookupSz, len(lookup))])
		if err != nil {
			return platform.Outcome{}, err
		}
		for email, id := range found {
			for _, i := range byEmail[email] {
				resolved[i].PlatformID = id
			}
		}
	}
	ids := make([]resource, 0, len(members))
	for _, m := range resolved {
		if m.PlatformID == "" {
			if validEmail(m.Email) {
				// No profile with this e-mail (deleted in Klaviyo): it cannot be on the list.
				out.Skipped++
				out.Gone = append(out.Gone, m)
			}
			continue
		}
		ids = append(ids, resource{Type: "profile", ID: m.PlatformID})
		out.Done = append(out.Done, m)
	}
	if len(ids) == 0 {
		return out, nil
	}
	body, err := json.Marshal(map[string]any{"data": ids})
	if err != nil {
		return platform.Outcome{}, err
	}
	if _, _, err := a.caller.Do(ctx, groupLists, http.MethodDelete,
		a.cfg.BaseURL+"/api/lists/"+url.PathEscape(a.cfg.ListID)+"/relationships/profiles", body, 1<<16); err != nil {
		return platform.Outcome{}, err
	}
	return out, nil
}

// lookup resolves e-mails to profile ids (lowercased e-mail -> id).
func (a *Adapter) lookup(ctx context.Context, emails []string) (map[string]string, error) {
	quoted := make([]string, len(emails))
	for i, e := range emails {
		quoted[i] = strconv.Quote(e)
	}
	q := url.Values{}
	q.Set("filter", "any(email,["+strings.Join(quoted, ",")+"])")
	q.Set("page[size]", strconv.Itoa(ProfileLookupSz))
	q.Set("fields[profile]", "email")
	_, data, err := a.caller.Do(ctx, groupProfiles, http.MethodGet, a.cfg.BaseURL+"/api/profiles?"+q.Encode(), nil, 4<<20)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Data []struct {
			ID         string `json:"id"`
			Attributes struct {
				Email string `json:"email"`
			} `json:"attributes"`
		} `json:"data"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, &platform.Error{Platform: "klaviyo", Status: 200, Message: "unreadable profiles answer: " + err.Error(), Retryable: true}
	}
	out := make(map[string]string, len(doc.Data))
	for _, p := range doc.Data {
		out[strings.ToLower(p.Attributes.Email)] = p.ID
	}
	return out, nil
}

// errorMessage reads Klaviyo's JSON:API error document: the first error's detail (or title), with
// its code.
func errorMessage(body []byte) string {
	var doc struct {
		Errors []struct {
			Code   string `json:"code"`
			Title  string `json:"title"`
			Detail string `json:"detail"`
		} `json:"errors"`
	}
	if json.Unmarshal(body, &doc) != nil || len(doc.Errors) == 0 {
		return ""
	}
	e := doc.Errors[0]
	msg := e.Detail
	if msg == "" {
		msg = e.Title
	}
	if e.Code != "" {
		msg = e.Code + ": " + msg
	}
	return msg
}

// validEmail accepts a bare address (what Klaviyo imports).
func validEmail(s string) bool {
	if s == "" || len(s) > 254 || strings.ContainsAny(s, " <>") {
		return false
	}
	a, err := mail.ParseAddress(s)
	return err == nil && a.Address == s
}
