package pageexport

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cohort-dev/cohort/internal/errs"
)

// keyRE matches Key's names: exports/t<tenant>/page-<page>-export-<export>.<format>.
var keyRE = regexp.MustCompile(`^exports/t([0-9]{1,19})/page-([0-9]{1,19})-export-([0-9]{1,19})\.(tsx|html|json|zip)$`)

// IsKey reports whether key names a page export's file (Key).
func IsKey(key string) bool { return keyRE.MatchString(key) }

func errDownloadGone() error {
	return errs.Coded(errs.ErrNotFound, "not_found", "this export no longer exists: its page or the export was deleted")
}

// Downloadable returns the export whose file key names (Key) while its links may be used: it
// is ready and not expired, and neither it nor its page was deleted. Anything else is a
// not-found error. The embedded blob store's links are served by the API, which asks this
// before it serves a page export's file, so deleting a page revokes them at once.
func (s *Service) Downloadable(ctx context.Context, key string) (*Export, error) {
	m := keyRE.FindStringSubmatch(key)
	if m == nil {
		return nil, errDownloadGone()
	}
	var ids [3]int64
	for i := range ids {
		n, err := strconv.ParseInt(m[i+1], 10, 64)
		if err != nil {
			return nil, errDownloadGone()
		}
		ids[i] = n
	}
	e, err := scanExport(s.pool.QueryRow(ctx, "SELECT "+exportColumns+` FROM page_exports
		WHERE tenant_id = $1 AND page_id = $2 AND id = $3 AND format = $4 AND status = 'ready' AND blob_key = $5`,
		ids[0], ids[1], ids[2], m[4], key))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errDownloadGone()
	}
	if err != nil {
		return nil, fmt.Errorf("load export of %s: %w", key, err)
	}
	if e.Expired(s.now()) {
		return nil, errDownloadGone()
	}
	return e, nil
}

// PageDeleter deletes a tenant's page (page.Service), its exports' records with it.
type PageDeleter interface {
	DeletePage(ctx context.Context, tenantID, id int64) error
}

// deleteFilesTimeout bounds deleting the files of a deleted page's exports.
const deleteFilesTimeout = 30 * time.Second

// DeletePage deletes one of the tenant's pages through pages and revokes the download links of
// its exports: their files are deleted from the blob store, which is what revokes a GCS signed
// URL (the embedded store's links are checked by Downloadable as well). The files go first, so
// a page whose files could not be deleted is kept and the delete can be retried (503); after the
// page, the files are deleted once more, for a build that finished in between (a build that
// finishes later finds its export gone and deletes its own file).
func (s *Service) DeletePage(ctx context.Context, tenantID, pageID int64, pages PageDeleter) error {
	rows, err := s.pool.Query(ctx, "SELECT "+exportColumns+" FROM page_exports WHERE tenant_id = $1 AND page_id = $2", tenantID, pageID)
	if err != nil {
		return fmt.Errorf("list exports of page %d: %w", pageID, err)
	}
	exports, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Export, error) { return scanExport(r) })
	if err != nil {
		return fmt.Errorf("list exports of page %d: %w", pageID, err)
	}
	keys := make([]string, len(exports))
	for i, e := range exports {
		keys[i] = Key(e) // where its file is or will be, built or not
	}
	if err := s.deleteFiles(ctx, keys); err != nil {
		return err
	}
	if err := pages.DeletePage(ctx, tenantID, pageID); err != nil {
		return err
	}
	return s.deleteFiles(ctx, keys)
}

func (s *Service) deleteFiles(ctx context.Context, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	// Not on the caller's context alone: a client that goes away must not leave half the files.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deleteFilesTimeout)
	defer cancel()
	var failed []error
	for _, k := range keys {
		if err := s.blob.Delete(dctx, k); err != nil {
			failed = append(failed, err)
		}
	}
	if len(failed) > 0 {
		return errors.Join(errs.Coded(errs.ErrUnavailable, "unavailable",
			"the page's export files could not be deleted: the blob store is unavailable; try again shortly"), errors.Join(failed...))
	}
	return nil
}

// trackingScript is the text of the HTML export's tracking snippet: the same in every export (it
// reads its settings from its own data-cohort-* attributes), so that a Content-Security-Policy
// can allow it by its hash instead of allowing every inline script. It names no user: the client
// library records the view as the visitor's anonymous id, which it keeps in the browser.
const trackingScript = `
(function (d) {
  var s = document.createElement("script");
  s.src = d.cohortSdk;
  s.async = true;
  s.onload = function () {
    if (window.Cohort && window.Cohort.Client) {
      new window.Cohort.Client({ apiUrl: d.cohortApi, apiKey: d.cohortKey }).trackPageView();
    }
  };
  document.head.appendChild(s);
})(document.currentScript.dataset);
`

// trackingScriptHash is trackingScript's CSP hash source.
var trackingScriptHash = func() string {
	sum := sha256.Sum256([]byte(trackingScript))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}()

// ContentSecurityPolicy is the policy an HTML export is downloaded with: nothing is allowed but
// its tracking snippet (by hash), the client library loaded from the API at apiBase and its
// requests there, the export's own inline styles, and images and fonts over http(s). No plugins,
// frames, forms or <base>.
func ContentSecurityPolicy(apiBase string) string {
	origin := ""
	if u, err := url.Parse(apiBase); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
		origin = " " + u.Scheme + "://" + u.Host
	}
	return "default-src 'none'; script-src " + trackingScriptHash + origin + "; connect-src" + orNone(origin) +
		"; img-src 'self' https: http: data:; style-src 'unsafe-inline'; font-src https: http: data:" +
		"; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}

func orNone(origin string) string {
	if origin == "" {
		return " 'none'"
	}
	return origin
}
