// Package pageexport builds the downloadable exports of a generated page: a JSON document (the
// page, its blocks, its products and the design tokens), one self-contained HTML5 document, one
// React component file (TSX) and a zip of all three with a README. HTML and TSX carry the
// tracking snippet: they load the client library's browser bundle from the API and record a
// page view with the tenant's public (pk_) key.
//
// The package keeps the export records (page_exports), renders the files and writes them to the
// blob store; the workflow that runs a build is another package's, behind Starter.
package pageexport

import (
	"context"
	"fmt"
	"time"

	"github.com/cohort-dev/cohort/internal/design"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/page"
)

// Format is an export's file format.
type Format string

// Formats of an export.
const (
	JSON Format = "json"
	HTML Format = "html"
	TSX  Format = "tsx"
	Zip  Format = "zip"
)

// Formats lists every format.
func Formats() []Format { return []Format{TSX, HTML, JSON, Zip} }

// ParseFormat validates a requested format.
func ParseFormat(s string) (Format, error) {
	for _, f := range Formats() {
		if string(f) == s {
			return f, nil
		}
	}
	return "", errs.Invalid("format", "must be one of tsx, html, json or zip")
}

// Ext is the file name extension of the format.
func (f Format) Ext() string { return "." + string(f) }

// ContentType is the media type the file is stored and downloaded with.
func (f Format) ContentType() string {
	switch f {
	case JSON:
		return "application/json"
	case HTML:
		return "text/html; charset=utf-8"
	case TSX:
		return "text/plain; charset=utf-8"
	case Zip:
		return "application/zip"
	}
	return "application/octet-stream"
}

// Statuses of an export: queued when requested, building while its workflow renders it, then
// ready (download_url is handed out until expires_at) or error.
const (
	StatusQueued   = "queued"
	StatusBuilding = "building"
	StatusReady    = "ready"
	StatusError    = "error"
	// StatusPending is what the export request answers (api/openapi.yaml,
	// createPageExport: 202 with status pending); the record itself starts queued.
	StatusPending = "pending"
)

// Limits.
const (
	// LinkTTL is how long a ready export's file can be downloaded: its signed links expire at
	// expires_at, LinkTTL after the build finished.
	LinkTTL = 24 * time.Hour
	// maxErrorLength bounds a recorded build error.
	maxErrorLength = 2000
)

// Export is one export of a page, as GET /api/ai-pages/pages/<id>/export/ shows it.
type Export struct {
	ID          int64      `json:"id"`
	PageID      int64      `json:"page_id"`
	Format      Format     `json:"format"`
	Status      string     `json:"status"`
	DownloadURL string     `json:"download_url,omitempty"`
	SizeBytes   *int64     `json:"size_bytes,omitempty"`
	Error       *string    `json:"error,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	FinishedAt  *time.Time `json:"finished_at"`
	ExpiresAt   *time.Time `json:"expires_at"`

	TenantID int64  `json:"-"`
	APIBase  string `json:"-"` // the API origin the tracking snippet calls
	BlobKey  string `json:"-"`
}

// Expired reports whether a ready export's links have run out.
func (e *Export) Expired(now time.Time) bool {
	return e.ExpiresAt != nil && !now.Before(*e.ExpiresAt)
}

// Started is the answer to an export request.
type Started struct {
	ExportID int64  `json:"export_id"`
	Status   string `json:"status"`
}

// Tokens are the design tokens an export is styled with: the tenant's design system's.
type Tokens = design.Tokens

// DefaultTokens are used when the tenant has no design system (or none is wired): the design
// system's own defaults.
func DefaultTokens() Tokens { return design.Default(0).Tokens }

// DesignStore is the DesignSource over the tenants' design systems (internal/design).
type DesignStore struct{ Store *design.Store }

// Tokens gives the tenant's design system (the default one, created, when it has none).
func (d DesignStore) Tokens(ctx context.Context, tenantID int64) (Tokens, error) {
	s, err := d.Store.Get(ctx, tenantID)
	if err != nil {
		return Tokens{}, err
	}
	return s.Tokens, nil
}

// DesignSource gives a tenant's design tokens.
type DesignSource interface {
	Tokens(ctx context.Context, tenantID int64) (Tokens, error)
}

// PageSource reads a page and the products it shows (internal/page.Service).
type PageSource interface {
	GetPage(ctx context.Context, tenantID, id int64) (*page.Page, error)
	Products(ctx context.Context, tenantID int64, skus []string) ([]page.PublicProduct, error)
}

// KeySource gives the public (pk_) key the tracking snippet of a tenant's exports uses.
type KeySource interface {
	PublicKey(ctx context.Context, tenantID int64) (string, error)
}

// Starter starts the build workflow of a recorded export (workflows.Starter).
type Starter interface {
	StartExport(ctx context.Context, tenantID, exportID int64) error
}

// Tracking is what the tracking snippet of an export loads and calls.
type Tracking struct {
	ScriptURL string `json:"script_url"` // the client library's browser bundle
	APIURL    string `json:"api_url"`
	PublicKey string `json:"api_key"`
}

// TrackingFor is the snippet's settings for an API at base (an origin, optionally with a path).
func TrackingFor(base, publicKey string) Tracking {
	return Tracking{ScriptURL: base + ScriptPath, APIURL: base, PublicKey: publicKey}
}

// ScriptPath is where the API serves the client library's browser bundle.
const ScriptPath = "/sdk/v1/cohort.min.js"

// Content is everything an export is rendered from.
type Content struct {
	Page     *page.Page
	Products []page.PublicProduct
	Tokens   Tokens
	Tracking Tracking
	// At dates the files of a zip (the export's creation), so a build is reproducible.
	At time.Time
	// Head is what a hosted page (internal/pagehost) adds to the HTML's <head>; nil in an export.
	Head *Head
}

// Head is the <head> of a hosted page beyond the export's: its meta description, canonical URL,
// Open Graph tags and schema.org JSON-LD.
type Head struct {
	Description string
	Canonical   string // the page's absolute URL (also og:url)
	Image       string // og:image: an http(s) URL, or ""
	// JSONLD is the schema.org document, as encoding/json writes it (with "<", ">" and "&"
	// escaped, which keeps it inside its <script> element).
	JSONLD []byte
}

// Key is where an export's file lives in the blob store.
func Key(e *Export) string {
	return fmt.Sprintf("exports/t%d/page-%d-export-%d%s", e.TenantID, e.PageID, e.ID, e.Format.Ext())
}
