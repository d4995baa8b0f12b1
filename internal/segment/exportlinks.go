package segment

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/cohort-dev/cohort/internal/blob"
	"github.com/cohort-dev/cohort/internal/errs"
)

// ExportWithLink returns one of the tenant's exports of the segment (GetExport) with
// download_url set when it is ready and not expired: a signed link of store that runs out at the
// export's expires_at, and never later than ExportTTL from now.
func (s *Service) ExportWithLink(ctx context.Context, tenantID, segmentID, exportID int64, store blob.Store) (*Export, error) {
	e, err := s.GetExport(ctx, tenantID, segmentID, exportID)
	if err != nil {
		return nil, err
	}
	now := s.now()
	if e.Status != "ready" || e.BlobKey == nil || e.ExpiresAt == nil || e.Expired(now) {
		return e, nil
	}
	url, err := store.SignedURL(ctx, *e.BlobKey, min(e.ExpiresAt.Sub(now), ExportTTL))
	if err != nil {
		return nil, fmt.Errorf("sign export link: %w", err)
	}
	e.DownloadURL = &url
	return e, nil
}

// OpenExport opens the file of one of the tenant's exports in store; the caller closes it. An
// export that is not ready is a conflict (export_not_ready), an expired one is gone
// (export_expired, 404), another tenant's is not found.
func (s *Service) OpenExport(ctx context.Context, tenantID, exportID int64, store blob.Store) (*Export, io.ReadCloser, error) {
	e, err := s.GetExport(ctx, tenantID, 0, exportID)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case e.Status != "ready" || e.BlobKey == nil:
		return nil, nil, errs.Coded(errs.ErrConflict, "export_not_ready", "export %d is %s; download it once its status is ready", e.ID, e.Status)
	case e.Expired(s.now()):
		return nil, nil, errs.Coded(errs.ErrNotFound, "export_expired", "export %d expired at %s; start a new export", e.ID, e.ExpiresAt.Format(time.RFC3339))
	}
	rc, err := store.Open(ctx, *e.BlobKey)
	if err != nil {
		return nil, nil, err
	}
	return e, rc, nil
}
