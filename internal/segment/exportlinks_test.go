package segment_test

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/segment"
)

// The export rules of GET /api/segments/<id>/export/ and /exports/<id>/download/: a link and a
// download only while the export is ready and not expired; another tenant's export is not found.
func TestExportLinkAndDownload(t *testing.T) {
	w := newExportWorld(t)
	f := w.f
	st := newExportStore(t)
	queued, err := f.svc.CreateExport(f.ctx, w.tenant, w.seg.ID, segment.ExportInput{Format: "csv"})
	if err != nil {
		t.Fatal(err)
	}
	// Queued: no link, no download.
	e, err := f.svc.ExportWithLink(f.ctx, w.tenant, w.seg.ID, queued.ID, st)
	if err != nil || e.DownloadURL != nil || e.Status != "queued" {
		t.Fatalf("queued export = %+v, %v; want no download_url", e, err)
	}
	if _, _, err := f.svc.OpenExport(f.ctx, w.tenant, queued.ID, st); !isCode(err, "export_not_ready") || !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("download of a queued export: %v, want 409 export_not_ready", err)
	}
	// Ready: a link that runs out with the export, and the file.
	if _, err := f.svc.WriteExport(f.ctx, w.tenant, queued.ID, st, nil); err != nil {
		t.Fatal(err)
	}
	e, err = f.svc.ExportWithLink(f.ctx, w.tenant, w.seg.ID, queued.ID, st)
	if err != nil || e.DownloadURL == nil || !strings.HasPrefix(*e.DownloadURL, "http://127.0.0.1:8080/") {
		t.Fatalf("ready export = %+v, %v; want a signed download_url", e, err)
	}
	got, rc, err := f.svc.OpenExport(f.ctx, w.tenant, queued.ID, st)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(rc)
	_ = rc.Close()
	if got.ID != queued.ID || !strings.HasPrefix(string(data), "user_id") {
		t.Fatalf("download = export %d, %q", got.ID, data)
	}
	// Another tenant's export, or the export under another segment: not found.
	if _, err := f.svc.ExportWithLink(f.ctx, w.other, w.seg.ID, queued.ID, st); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("another tenant's export status: %v", err)
	}
	if _, err := f.svc.ExportWithLink(f.ctx, w.tenant, w.otherSeg.ID, queued.ID, st); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("export under another segment: %v", err)
	}
	if _, _, err := f.svc.OpenExport(f.ctx, w.other, queued.ID, st); !errors.Is(err, errs.ErrNotFound) || isCode(err, "export_expired") {
		t.Fatalf("another tenant's download: %v", err)
	}
	// Expired: no link, and the download is 404 export_expired.
	f.clock.Advance(segment.ExportTTL + time.Second)
	e, err = f.svc.ExportWithLink(f.ctx, w.tenant, w.seg.ID, queued.ID, st)
	if err != nil || e.DownloadURL != nil {
		t.Fatalf("expired export = %+v, %v; want no download_url", e, err)
	}
	if _, _, err := f.svc.OpenExport(f.ctx, w.tenant, queued.ID, st); !isCode(err, "export_expired") || !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("download of an expired export: %v, want 404 export_expired", err)
	}
}

// isCode reports a coded error (errs.Coded) with code.
func isCode(err error, code string) bool {
	var ce *errs.CodedError
	return errors.As(err, &ce) && ce.Code == code
}
