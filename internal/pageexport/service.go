package pageexport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cohort-dev/cohort/internal/blob"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/startjob"
)

// Service keeps the export records of every tenant, starts their builds and builds them.
type Service struct {
	pool    *pgxpool.Pool
	pages   PageSource
	design  DesignSource // nil: DefaultTokens
	keys    KeySource
	blob    blob.Store
	starter Starter // nil where builds are not started (the worker)
	now     func() time.Time
}

// Deps are a Service's dependencies.
type Deps struct {
	Pool    *pgxpool.Pool
	Pages   PageSource
	Design  DesignSource // optional: without it exports use DefaultTokens
	Keys    KeySource
	Blob    blob.Store
	Starter Starter // optional: without it Start answers 503
	Now     func() time.Time
}

// NewService builds the service.
func NewService(d Deps) *Service {
	if d.Now == nil {
		d.Now = time.Now
	}
	return &Service{pool: d.Pool, pages: d.Pages, design: d.Design, keys: d.Keys, blob: d.Blob, starter: d.Starter, now: d.Now}
}

const exportColumns = "id, tenant_id, page_id, format, status, api_base, blob_key, size_bytes, error, created_at, finished_at, expires_at"

func scanExport(row pgx.Row) (*Export, error) {
	var e Export
	var key *string
	if err := row.Scan(&e.ID, &e.TenantID, &e.PageID, &e.Format, &e.Status, &e.APIBase, &key, &e.SizeBytes, &e.Error,
		&e.CreatedAt, &e.FinishedAt, &e.ExpiresAt); err != nil {
		return nil, err
	}
	if key != nil {
		e.BlobKey = *key
	}
	return &e, nil
}

func exportNotFound(pageID, exportID int64) error {
	if exportID == 0 {
		return errs.Coded(errs.ErrNotFound, "not_found", "page %d has no export yet", pageID)
	}
	return errs.Coded(errs.ErrNotFound, "not_found", "export %d of page %d not found", exportID, pageID)
}

// Start records a queued export of one of the tenant's pages and starts its build. apiBase is
// the API origin the tracking snippet calls (COHORT_PUBLIC_URL, or the one the request came to).
// When the build cannot be started the export is recorded as failed and the error (503) says
// why.
func (s *Service) Start(ctx context.Context, tenantID, pageID int64, format string, apiBase string) (*Started, error) {
	f, err := ParseFormat(format)
	if err != nil {
		return nil, err
	}
	if s.starter == nil {
		return nil, errs.Coded(errs.ErrUnavailable, "export_unavailable", "page exports cannot be started here")
	}
	var id int64
	err = startjob.RecordStartUndo(ctx, startjob.Caller,
		func(ctx context.Context) error {
			err := s.pool.QueryRow(ctx, `INSERT INTO page_exports (tenant_id, page_id, format, status, api_base, created_at)
		SELECT tenant_id, id, $3, 'queued', $4, $5 FROM generated_pages WHERE tenant_id = $1 AND id = $2
		RETURNING id`, tenantID, pageID, string(f), apiBase, s.now().UTC()).Scan(&id)
			if errors.Is(err, pgx.ErrNoRows) {
				return errs.Coded(errs.ErrNotFound, "not_found", "page %d not found", pageID)
			}
			if err != nil {
				return fmt.Errorf("record export: %w", err)
			}
			return nil
		},
		func(ctx context.Context) error {
			if err := s.starter.StartExport(ctx, tenantID, id); err != nil {
				return errors.Join(errs.Coded(errs.ErrUnavailable, "export_unavailable",
					"the export could not be started: the workflow service is unavailable; try again shortly"), err)
			}
			return nil
		},
		func(ctx context.Context) error {
			return s.Fail(ctx, tenantID, id, "the export could not be started: the workflow service was unavailable")
		})
	if err != nil {
		return nil, err
	}
	return &Started{ExportID: id, Status: StatusPending}, nil
}

// Get returns one of the tenant's exports of the page; exportID 0 means the latest.
func (s *Service) Get(ctx context.Context, tenantID, pageID, exportID int64) (*Export, error) {
	var row pgx.Row
	if exportID == 0 {
		row = s.pool.QueryRow(ctx, "SELECT "+exportColumns+" FROM page_exports WHERE tenant_id = $1 AND page_id = $2 ORDER BY id DESC LIMIT 1", tenantID, pageID)
	} else {
		row = s.pool.QueryRow(ctx, "SELECT "+exportColumns+" FROM page_exports WHERE tenant_id = $1 AND page_id = $2 AND id = $3", tenantID, pageID, exportID)
	}
	e, err := scanExport(row)
	if errors.Is(err, pgx.ErrNoRows) {
		if exportID == 0 {
			if perr := s.pageExists(ctx, tenantID, pageID); perr != nil {
				return nil, perr
			}
		}
		return nil, exportNotFound(pageID, exportID)
	}
	if err != nil {
		return nil, fmt.Errorf("load export: %w", err)
	}
	return e, nil
}

func (s *Service) pageExists(ctx context.Context, tenantID, pageID int64) error {
	var one int
	err := s.pool.QueryRow(ctx, "SELECT 1 FROM generated_pages WHERE tenant_id = $1 AND id = $2", tenantID, pageID).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return errs.Coded(errs.ErrNotFound, "not_found", "page %d not found", pageID)
	}
	if err != nil {
		return fmt.Errorf("load page %d: %w", pageID, err)
	}
	return nil
}

// WithLink returns e with download_url set when it is ready and not expired: a signed link of
// the blob store that runs out at the export's expires_at (24 hours after it was built).
func (s *Service) WithLink(ctx context.Context, e *Export) (*Export, error) {
	now := s.now()
	if e.Status != StatusReady || e.BlobKey == "" || e.ExpiresAt == nil || e.Expired(now) {
		return e, nil
	}
	ttl := min(e.ExpiresAt.Sub(now), LinkTTL)
	url, err := s.blob.SignedURL(ctx, e.BlobKey, ttl)
	if err != nil {
		return nil, fmt.Errorf("sign export link: %w", err)
	}
	out := *e
	out.DownloadURL = url
	return &out, nil
}

// errExportGone is a build of an export that no longer exists (its page was deleted).
var errExportGone = errors.New("export not found")

// IsGone reports a build whose export (or page) no longer exists.
func IsGone(err error) bool { return errors.Is(err, errExportGone) }

// Build renders a recorded export and writes its file to the blob store: the export is marked
// building, the page, its products, the design tokens and the tenant's public key are read, the
// file is rendered and stored, and the export becomes ready with expires_at 24 hours later. A
// ready export is left as it is.
func (s *Service) Build(ctx context.Context, tenantID, exportID int64) (*Export, error) {
	e, err := scanExport(s.pool.QueryRow(ctx, "SELECT "+exportColumns+" FROM page_exports WHERE tenant_id = $1 AND id = $2", tenantID, exportID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("export %d: %w", exportID, errExportGone)
	}
	if err != nil {
		return nil, fmt.Errorf("load export %d: %w", exportID, err)
	}
	if e.Status == StatusReady {
		return e, nil
	}
	if _, err := s.pool.Exec(ctx, `UPDATE page_exports SET status = 'building' WHERE tenant_id = $1 AND id = $2 AND status IN ('queued', 'building')`, tenantID, exportID); err != nil {
		return nil, fmt.Errorf("mark export %d building: %w", exportID, err)
	}
	c, err := s.content(ctx, e)
	if err != nil {
		return nil, err
	}
	body, err := Render(e.Format, c)
	if err != nil {
		return nil, err
	}
	key := Key(e)
	n, err := s.blob.Put(ctx, key, bytes.NewReader(body), e.Format.ContentType())
	if err != nil {
		return nil, fmt.Errorf("store export %d: %w", exportID, err)
	}
	now := s.now().UTC()
	exp := now.Add(LinkTTL)
	tag, err := s.pool.Exec(ctx, `UPDATE page_exports SET status = 'ready', blob_key = $3, size_bytes = $4, finished_at = $5, expires_at = $6, error = NULL
		WHERE tenant_id = $1 AND id = $2`, tenantID, exportID, key, n, now, exp)
	if err != nil {
		return nil, fmt.Errorf("finish export %d: %w", exportID, err)
	}
	if tag.RowsAffected() == 0 {
		_ = s.blob.Delete(ctx, key)
		return nil, fmt.Errorf("export %d: %w", exportID, errExportGone)
	}
	e.Status, e.BlobKey, e.SizeBytes, e.FinishedAt, e.ExpiresAt = StatusReady, key, &n, &now, &exp
	return e, nil
}

// content reads what the export is rendered from.
func (s *Service) content(ctx context.Context, e *Export) (Content, error) {
	p, err := s.pages.GetPage(ctx, e.TenantID, e.PageID)
	if errors.Is(err, errs.ErrNotFound) {
		return Content{}, fmt.Errorf("page %d: %w", e.PageID, errExportGone)
	}
	if err != nil {
		return Content{}, err
	}
	products, err := s.pages.Products(ctx, e.TenantID, GridSKUs(p))
	if err != nil {
		return Content{}, err
	}
	tokens := DefaultTokens()
	if s.design != nil {
		if tokens, err = s.design.Tokens(ctx, e.TenantID); err != nil {
			return Content{}, fmt.Errorf("load design tokens: %w", err)
		}
	}
	key, err := s.keys.PublicKey(ctx, e.TenantID)
	if err != nil {
		return Content{}, fmt.Errorf("load public key: %w", err)
	}
	return Content{Page: p, Products: products, Tokens: tokens, Tracking: TrackingFor(e.APIBase, key), At: e.CreatedAt}, nil
}

// Fail records a failed build (unless the export is already ready).
func (s *Service) Fail(ctx context.Context, tenantID, exportID int64, msg string) error {
	if len(msg) > maxErrorLength {
		msg = msg[:maxErrorLength]
		for !utf8.ValidString(msg) {
			msg = msg[:len(msg)-1]
		}
	}
	_, err := s.pool.Exec(ctx, `UPDATE page_exports SET status = 'error', error = $3, finished_at = $4
		WHERE tenant_id = $1 AND id = $2 AND status <> 'ready'`, tenantID, exportID, msg, s.now().UTC())
	if err != nil {
		return fmt.Errorf("record failed export %d: %w", exportID, err)
	}
	return nil
}
