// Package imports runs CSV imports into the product catalogue: the upload, analysed from a sample
// while the API waits (status mapping), the confirmation that saves the schema and starts the
// import, and the import itself, which streams the file from the blob store in chunks, upserts
// each chunk by SKU and records its progress with it, so a retried import resumes where the last
// committed chunk ended and never counts a row twice.
//
// Job statuses: pending (uploading and analysing) -> mapping (waiting for the confirmation) ->
// importing -> done or failed. Bad rows are counted and the first MaxErrors reported by row
// number; they never stop an import. A file that cannot be read on (a row longer than
// csvimport.MaxRowBytes, the object gone from the blob store) fails the job.
package imports

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cohort-dev/cohort/internal/blob"
	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/catalog/csvimport"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/startjob"
)

// Limits.
const (
	MaxFileBytes     = 200 << 20 // an upload beyond is refused with 413
	MaxErrors        = 100       // row errors a job keeps (the count goes on)
	DefaultChunkRows = 1000      // rows per chunk: one bulk upsert and one checkpoint
	maxFilenameLen   = 255
)

// Job statuses.
const (
	StatusPending   = "pending"
	StatusMapping   = "mapping"
	StatusImporting = "importing"
	StatusDone      = "done"
	StatusFailed    = "failed"
)

// ErrFailed is wrapped by the errors of Run that end the import: retrying cannot help.
var ErrFailed = errors.New("import failed")

// RowError is one bad row.
type RowError struct {
	Row     int    `json:"row"` // as a spreadsheet numbers it: the header is row 1
	Message string `json:"message"`
}

// Job is an import job as the API shows it.
type Job struct {
	JobID     int64  `json:"job_id"`
	Status    string `json:"status"`
	Filename  string `json:"filename"`
	SizeBytes int64  `json:"size_bytes"`

	// The analysis, from status mapping on.
	Delimiter        string                    `json:"delimiter,omitempty"`
	Headers          []string                  `json:"headers"`
	RowsEstimated    int64                     `json:"rows_estimated"`
	SuggestedSchema  []catalog.Field           `json:"suggested_schema"`
	SuggestedMapping map[string]*string        `json:"suggested_mapping"`
	SampleRows       []map[string]string       `json:"sample_rows"`
	Options          *csvimport.ConvertOptions `json:"options,omitempty"`
	Mapping          map[string]*string        `json:"mapping"`    // the confirmed one; null before
	TotalRows        int64                     `json:"total_rows"` // rows_estimated until the file is read to its end
	ProcessedRows    int64                     `json:"processed_rows"`
	Created          int64                     `json:"created"`
	Updated          int64                     `json:"updated"`
	Unchanged        int64                     `json:"unchanged"`
	SkippedRows      int64                     `json:"skipped_rows"`
	FailedRows       int64                     `json:"failed_rows"`
	Errors           []RowError                `json:"errors"`
	Error            string                    `json:"error,omitempty"`
	CreatedAt        time.Time                 `json:"created_at"`
	StartedAt        *time.Time                `json:"started_at"`
	FinishedAt       *time.Time                `json:"finished_at"`

	analysis   *csvimport.Analysis
	checkpoint *checkpoint
	blobKey    string
}

// Starter starts the import of a confirmed job (a Temporal workflow), returning its id.
type Starter interface {
	StartImport(ctx context.Context, tenantID, jobID int64) (string, error)
}

// NoStarter is the Starter of a role that runs imports but does not start them: Confirm
// answers 503 with why.
type NoStarter struct{}

// StartImport refuses.
func (NoStarter) StartImport(context.Context, int64, int64) (string, error) {
	return "", fmt.Errorf("%w: imports cannot be started here (this process has no import starter)", errs.ErrUnavailable)
}

// Service owns the import jobs of every tenant.
type Service struct {
	pool      *pgxpool.Pool
	catalog   *catalog.Service
	blob      blob.Store
	starter   Starter
	now       func() time.Time
	chunkRows int
}

// NewService builds the service. starter is what Confirm starts imports with (NoStarter{} where
// imports are not started).
func NewService(pool *pgxpool.Pool, cat *catalog.Service, store blob.Store, starter Starter, now func() time.Time) *Service {
	if starter == nil {
		starter = NoStarter{}
	}
	return &Service{pool: pool, catalog: cat, blob: store, starter: starter, now: now, chunkRows: DefaultChunkRows}
}

// SetChunkRows sets the rows per chunk (tests use small chunks to cross many checkpoints).
func (s *Service) SetChunkRows(n int) {
	if n > 0 {
		s.chunkRows = n
	}
}

func blobKey(tenantID, jobID int64) string {
	return fmt.Sprintf("tenants/%d/imports/%d.csv", tenantID, jobID)
}

// Upload stores the file of a new job in the blob store and analyses it from a sample: the job
// answered is in status mapping, with the suggested schema and mapping. A file over MaxFileBytes
// is refused (413, file_too_large), one that is not a usable CSV (400, bad_csv); neither leaves a
// job behind.
func (s *Service) Upload(ctx context.Context, tenantID int64, filename string, r io.Reader) (*Job, error) {
	filename = cleanFilename(filename)
	var id int64
	now := s.now().UTC()
	err := s.pool.QueryRow(ctx, `INSERT INTO import_jobs (tenant_id, status, filename, created_at, updated_at)
		VALUES ($1, 'pending', $2, $3, $3) RETURNING id`, tenantID, filename, now).Scan(&id)
	if err != nil {
		return nil, fmt.Errorf("create import job: %w", err)
	}
	key := blobKey(tenantID, id)
	discard := func() {
		// Best effort on a context of its own: the caller's may be what failed.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = s.blob.Delete(cctx, key)
		_, _ = s.pool.Exec(cctx, `DELETE FROM import_jobs WHERE tenant_id = $1 AND id = $2`, tenantID, id)
	}
	cr := &capReader{r: r, limit: MaxFileBytes}
	size, err := s.blob.Put(ctx, key, cr, "text/csv")
	switch {
	case cr.over:
		discard()
		return nil, errs.Coded(errs.ErrTooLarge, "file_too_large", "the file is larger than %d MB", MaxFileBytes>>20)
	case cr.err != nil: // reading the upload failed: the client's body, not the blob store
		discard()
		return nil, &UploadError{Err: cr.err}
	case err != nil:
		discard()
		return nil, fmt.Errorf("%w: store the uploaded file: %w", errs.ErrUnavailable, err)
	}
	an, err := csvimport.Analyze(&blobReaderAt{ctx: ctx, store: s.blob, key: key}, size)
	if err != nil {
		discard()
		if errors.Is(err, csvimport.ErrBadCSV) {
			return nil, errs.Coded(errs.ErrInvalid, "bad_csv", "%s", strings.TrimPrefix(err.Error(), csvimport.ErrBadCSV.Error()+": "))
		}
		return nil, fmt.Errorf("%w: analyse the uploaded file: %w", errs.ErrUnavailable, err)
	}
	raw, err := json.Marshal(an)
	if err != nil {
		discard()
		return nil, fmt.Errorf("encode the analysis: %w", err)
	}
	_, err = s.pool.Exec(ctx, `UPDATE import_jobs SET status = 'mapping', blob_key = $3, size_bytes = $4, analysis = $5,
			updated_at = $6 WHERE tenant_id = $1 AND id = $2`, tenantID, id, key, size, raw, s.now().UTC())
	if err != nil {
		discard()
		return nil, fmt.Errorf("store the analysis: %w", err)
	}
	return s.Get(ctx, tenantID, id)
}

func cleanFilename(name string) string {
	name = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, strings.TrimSpace(name))
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	if len(name) > maxFilenameLen {
		name = strings.ToValidUTF8(name[:maxFilenameLen], "")
	}
	return name
}

// UploadError: reading the upload itself failed (the request body was cut short or is over the
// request's limit), not the blob store.
type UploadError struct{ Err error }

func (e *UploadError) Error() string { return "read the uploaded file: " + e.Err.Error() }
func (e *UploadError) Unwrap() error { return e.Err }

// capReader passes at most limit bytes and remembers whether the input had more, and the
// input's own error (a broken upload), apart from the blob store's.
type capReader struct {
	r     io.Reader
	limit int64
	n     int64
	over  bool
	err   error
}

var errCapped = errors.New("upload over the size limit")

func (c *capReader) Read(p []byte) (int, error) {
	if c.over {
		return 0, errCapped
	}
	if int64(len(p)) > c.limit-c.n+1 {
		p = p[:c.limit-c.n+1] // one byte past the limit tells an exact fit from an overflow
	}
	k, err := c.r.Read(p)
	c.n += int64(k)
	if c.n > c.limit {
		c.over = true
		return 0, errCapped
	}
	if err != nil && err != io.EOF {
		c.err = err
	}
	return k, err
}

// blobReaderAt reads an object by ranges: the analysis reads a sample at the start and one in
// the middle, not the whole file.
type blobReaderAt struct {
	ctx   context.Context
	store blob.Store
	key   string
}

func (b *blobReaderAt) ReadAt(p []byte, off int64) (int, error) {
	rc, err := b.store.OpenRange(b.ctx, b.key, off, int64(len(p)))
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	n, err := io.ReadFull(rc, p)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = io.EOF
	}
	return n, err
}

const jobColumns = `id, status, filename, size_bytes, analysis, mapping, total_rows, processed_rows, created, updated,
	unchanged, skipped_rows, failed_rows, errors, error, checkpoint, created_at, started_at, finished_at, blob_key`

func scanJob(row pgx.Row) (*Job, error) {
	var (
		j                  Job
		analysis, mapping  []byte
		errorsRaw, ckptRaw []byte
		total              *int64
	)
	err := row.Scan(&j.JobID, &j.Status, &j.Filename, &j.SizeBytes, &analysis, &mapping, &total, &j.ProcessedRows,
		&j.Created, &j.Updated, &j.Unchanged, &j.SkippedRows, &j.FailedRows, &errorsRaw, &j.Error, &ckptRaw,
		&j.CreatedAt, &j.StartedAt, &j.FinishedAt, &j.blobKey)
	if err != nil {
		return nil, err
	}
	j.Headers, j.SampleRows, j.SuggestedSchema, j.SuggestedMapping, j.Errors = []string{}, []map[string]string{}, []catalog.Field{}, map[string]*string{}, []RowError{}
	if analysis != nil {
		var an csvimport.Analysis
		if err := json.Unmarshal(analysis, &an); err != nil {
			return nil, fmt.Errorf("decode import analysis: %w", err)
		}
		j.analysis = &an
		j.Delimiter, j.Headers, j.RowsEstimated = an.Delimiter, an.Headers, an.RowsEstimated
		j.SuggestedSchema, j.SuggestedMapping, j.SampleRows, j.Options = an.SuggestedSchema, an.SuggestedMapping, an.SampleRows, &an.Options
	}
	if mapping != nil {
		if err := json.Unmarshal(mapping, &j.Mapping); err != nil {
			return nil, fmt.Errorf("decode import mapping: %w", err)
		}
	}
	if err := json.Unmarshal(errorsRaw, &j.Errors); err != nil {
		return nil, fmt.Errorf("decode import errors: %w", err)
	}
	if ckptRaw != nil {
		j.checkpoint = &checkpoint{}
		if err := json.Unmarshal(ckptRaw, j.checkpoint); err != nil {
			return nil, fmt.Errorf("decode import checkpoint: %w", err)
		}
	}
	j.TotalRows = j.RowsEstimated
	if total != nil {
		j.TotalRows = *total
	}
	return &j, nil
}

// Get returns the tenant's job; another tenant's is not found.
func (s *Service) Get(ctx context.Context, tenantID, jobID int64) (*Job, error) {
	return s.get(ctx, s.pool, tenantID, jobID, false)
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func (s *Service) get(ctx context.Context, q querier, tenantID, jobID int64, lock bool) (*Job, error) {
	sql := `SELECT ` + jobColumns + ` FROM import_jobs WHERE tenant_id = $1 AND id = $2`
	if lock {
		sql += ` FOR UPDATE`
	}
	j, err := scanJob(q.QueryRow(ctx, sql, tenantID, jobID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errs.Coded(errs.ErrNotFound, "not_found", "import job %d not found", jobID)
	}
	if err != nil {
		return nil, fmt.Errorf("load import job %d: %w", jobID, err)
	}
	return j, nil
}

// ConfirmInput is the body of POST /api/pim/import/{job_id}/confirm/.
type ConfirmInput struct {
	// Mapping maps CSV headers to "sku", "name", a field of Schema, or null (skipped). A header
	// left out is skipped. Exactly one header maps to sku; at most one to name and to each field.
	Mapping map[string]*string `json:"mapping"`
	// Schema replaces the tenant's schema fields; left out (null), the current fields stay.
	Schema          *[]catalog.Field `json:"schema"`
	DefaultCurrency *string          `json:"default_currency"`
	DefaultLocale   *string          `json:"default_locale"`
}

// Confirm saves the schema, records the mapping, moves the job to importing and starts the
// import. The job's status is checked and claimed in the transaction that saves the schema,
// under the job's row lock: a job that is not in mapping (confirmed already, by this call's
// twin or before) is refused (400, job_not_in_mapping) and the schema is left as it was. When
// the import cannot be started the job goes back to mapping and the error (503) says why:
// confirm again (the schema stays saved).
func (s *Service) Confirm(ctx context.Context, tenantID, jobID int64, in ConfirmInput) (*Job, error) {
	mapping, err := json.Marshal(in.Mapping)
	if err != nil {
		return nil, fmt.Errorf("encode the mapping: %w", err)
	}
	_, err = s.catalog.EditSchema(ctx, tenantID, func(ctx context.Context, tx pgx.Tx, current catalog.Schema) (catalog.Schema, error) {
		job, err := s.get(ctx, tx, tenantID, jobID, true)
		if err != nil {
			return current, err
		}
		if job.Status != StatusMapping {
			return current, notInMapping(job)
		}
		next := current
		if in.Schema != nil {
			next.Fields = *in.Schema
			if next.Fields == nil {
				next.Fields = []catalog.Field{}
			}
		}
		if in.DefaultCurrency != nil {
			next.DefaultCurrency = *in.DefaultCurrency
		}
		if in.DefaultLocale != nil {
			next.DefaultLocale = *in.DefaultLocale
		}
		if err := next.Validate(); err != nil {
			return current, err
		}
		if err := checkMapping(job.Headers, in.Mapping, next.Fields); err != nil {
			return current, err
		}
		now := s.now().UTC()
		if _, err := tx.Exec(ctx, `UPDATE import_jobs SET status = 'importing', mapping = $3, started_at = $4, updated_at = $4
			WHERE tenant_id = $1 AND id = $2`, tenantID, jobID, mapping, now); err != nil {
			return current, fmt.Errorf("confirm import job %d: %w", jobID, err)
		}
		return next, nil
	})
	if err != nil {
		return nil, schemaPaths(err)
	}
	var wid string
	err = startjob.RecordStartUndo(ctx, startjob.Caller, nil,
		func(ctx context.Context) (err error) {
			wid, err = s.starter.StartImport(ctx, tenantID, jobID)
			return err
		},
		func(ctx context.Context) error {
			if _, err := s.pool.Exec(ctx, `UPDATE import_jobs SET status = 'mapping', started_at = NULL, updated_at = $3
			WHERE tenant_id = $1 AND id = $2 AND status = 'importing' AND processed_rows = 0`, tenantID, jobID, s.now().UTC()); err != nil {
				return fmt.Errorf("the job could not go back to mapping: %w", err)
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	if _, err := s.pool.Exec(ctx, `UPDATE import_jobs SET workflow_id = $3 WHERE tenant_id = $1 AND id = $2`, tenantID, jobID, wid); err != nil {
		return nil, fmt.Errorf("record the import workflow: %w", err)
	}
	return s.Get(ctx, tenantID, jobID)
}

func notInMapping(job *Job) error {
	return errs.Coded(errs.ErrInvalid, "job_not_in_mapping", "import job %d is %s; only a job in mapping can be confirmed", job.JobID, job.Status)
}

// schemaPaths names the schema's field errors as the confirm body has them: its fields list is
// "schema" ("fields[0].type" -> "schema[0].type"). The error's code and message stay.
func schemaPaths(err error) error {
	var ve *errs.ValidationError
	if !errors.As(err, &ve) || len(ve.Fields) == 0 {
		return err
	}
	f := make(map[string]string, len(ve.Fields))
	for k, v := range ve.Fields {
		if rest, ok := strings.CutPrefix(k, "fields"); ok {
			k = "schema" + rest
		}
		f[k] = v
	}
	return &errs.ValidationError{Code: ve.Code, Msg: ve.Msg, Fields: f}
}

func checkMapping(headers []string, mapping map[string]*string, fields []catalog.Field) error {
	f := errs.Fields{}
	if mapping == nil {
		f.Add("mapping", "is required: an object mapping each CSV header to sku, name, a schema field or null")
		return f.Err()
	}
	known := make(map[string]bool, len(headers))
	for _, h := range headers {
		known[h] = true
	}
	types := make(map[string]bool, len(fields))
	for _, fd := range fields {
		types[fd.Name] = true
	}
	used := map[string]string{}
	for _, h := range headers { // header order: the first of two headers keeps the target
		t := mapping[h]
		if t == nil {
			continue
		}
		switch {
		case *t == "sku" || *t == "name" || types[*t]:
		default:
			f.Add("mapping."+h, "%q is not sku, name or a field of the schema", *t)
			continue
		}
		if prev, dup := used[*t]; dup {
			f.Add("mapping."+h, "maps to %q, as %q does already", *t, prev)
			continue
		}
		used[*t] = h
	}
	for h := range mapping {
		if !known[h] {
			f.Add("mapping."+h, "is not a header of the file")
		}
	}
	if _, ok := used["sku"]; !ok && len(f) == 0 {
		f.Add("mapping", "map one header to sku: products are upserted by SKU")
	}
	return f.Err()
}

// Fail ends an importing job as failed with the reason.
func (s *Service) Fail(ctx context.Context, tenantID, jobID int64, reason string) error {
	now := s.now().UTC()
	_, err := s.pool.Exec(ctx, `UPDATE import_jobs SET status = 'failed', error = $3, finished_at = $4, updated_at = $4
		WHERE tenant_id = $1 AND id = $2 AND status = 'importing'`, tenantID, jobID, reason, now)
	if err != nil {
		return fmt.Errorf("fail import job %d: %w", jobID, err)
	}
	return nil
}
