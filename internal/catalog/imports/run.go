package imports

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cohort-dev/cohort/internal/blob"
	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/catalog/csvimport"
)

// checkpoint is where the next chunk starts: the reader's position and, in a Shopify export,
// the product (handle) the last row belonged to with the cells its variant rows inherit.
type checkpoint struct {
	Pos   csvimport.Position `json:"pos"`
	Group string             `json:"group,omitempty"`
	First map[string]string  `json:"first,omitempty"`
}

// Progress is reported after every committed chunk.
type Progress struct {
	ProcessedRows int64
	TotalRows     int64 // estimated
}

// errSuperseded: the job moved on without us (another attempt committed a chunk, or the job is
// no longer importing). The attempt stops; a retry reloads the checkpoint.
var errSuperseded = errors.New("import job moved on: another attempt committed first or the job ended")

// Run imports a confirmed job's file from its checkpoint to the end, one chunk per transaction,
// and marks it done. A job that is not importing is left alone (nil). Errors wrapping ErrFailed
// are permanent (call Fail); any other error is worth a retry, which resumes at the checkpoint.
func (s *Service) Run(ctx context.Context, tenantID, jobID int64, progress func(Progress)) error {
	job, err := s.Get(ctx, tenantID, jobID)
	if err != nil {
		return err
	}
	if job.Status != StatusImporting {
		return nil
	}
	if job.analysis == nil || job.Mapping == nil {
		return fmt.Errorf("%w: the job has no analysis or mapping", ErrFailed)
	}
	sc, err := s.catalog.Schema(ctx, tenantID)
	if err != nil {
		return err
	}
	conv, err := newConverter(job.analysis, job.Mapping, sc)
	if err != nil {
		return err
	}
	rd, body, ck, err := s.open(ctx, job)
	if err != nil {
		return err
	}
	defer body.Close()
	st := &runState{job: job, ck: ck, errCount: len(job.Errors)}
	// The next chunk is read and converted while the current one commits: the file's parsing
	// overlaps the database's work. Commits stay in order, one at a time.
	ctx, cancel := context.WithCancel(ctx)
	chunks := make(chan readResult, 1)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		s.readChunks(ctx, rd, conv, ck, chunks)
	}()
	defer func() { cancel(); <-readerDone }() // before the body closes
	for {
		var r readResult
		select {
		case r = <-chunks:
		case <-ctx.Done():
			return ctx.Err()
		}
		if r.err != nil {
			return r.err
		}
		c := r.chunk
		if err := s.commit(ctx, tenantID, st, c); err != nil {
			return err
		}
		if progress != nil {
			progress(Progress{ProcessedRows: st.job.ProcessedRows, TotalRows: st.job.TotalRows})
		}
		if c.eof {
			analyzeAfter(ctx, s.pool, st.job)
			return nil
		}
	}
}

// analyzeThreshold is the products an import writes before it refreshes the planner's
// statistics of the products table itself.
const analyzeThreshold = 10_000

// analyzeAfter refreshes the statistics after a large import, as autovacuum would a while later
// where it runs: until then list filters are planned from what the table held before the import,
// and lists are measurably slower (task bench:catalog compares a list right after a load with one
// after ANALYZE). Best effort: the import is done either way.
func analyzeAfter(ctx context.Context, pool *pgxpool.Pool, job *Job) {
	if job.Created+job.Updated < analyzeThreshold {
		return
	}
	if _, err := pool.Exec(ctx, "ANALYZE products"); err != nil {
		slog.WarnContext(ctx, "analyze products after import", "job_id", job.JobID, "error", err)
	}
}

type readResult struct {
	chunk *chunk
	err   error
}

// readChunks reads the file chunk after chunk from the checkpoint ck until its end, an error or
// ctx ends.
func (s *Service) readChunks(ctx context.Context, rd *csvimport.Reader, conv *converter, ck checkpoint, out chan<- readResult) {
	for {
		c, err := s.readChunk(rd, conv, ck)
		select {
		case out <- readResult{chunk: c, err: err}:
		case <-ctx.Done():
			return
		}
		if err != nil || c.eof {
			return
		}
		ck = c.next
	}
}

// open returns a reader of the job's rows from its checkpoint.
func (s *Service) open(ctx context.Context, job *Job) (*csvimport.Reader, io.Closer, checkpoint, error) {
	an := job.analysis
	gone := func(err error) error {
		if errors.Is(err, blob.ErrNotFound) {
			return fmt.Errorf("%w: the uploaded file is no longer in the blob store", ErrFailed)
		}
		return fmt.Errorf("open the uploaded file: %w", err)
	}
	if job.checkpoint != nil {
		ck := *job.checkpoint
		body, err := s.blob.OpenRange(ctx, job.blobKey, ck.Pos.Offset, -1)
		if err != nil {
			return nil, nil, ck, gone(err)
		}
		rd, err := csvimport.Resume(body, an.Delimiter, an.Headers, ck.Pos)
		if err != nil {
			_ = body.Close()
			return nil, nil, ck, fmt.Errorf("%w: %w", ErrFailed, err)
		}
		return rd, body, ck, nil
	}
	body, err := s.blob.Open(ctx, job.blobKey)
	if err != nil {
		return nil, nil, checkpoint{}, gone(err)
	}
	rd, err := csvimport.NewReader(body, an.Delimiter)
	if err == nil && !slices.Equal(rd.Headers(), an.Headers) {
		err = errors.New("the file's headers are not those analysed")
	}
	if err != nil {
		_ = body.Close()
		if errors.Is(err, csvimport.ErrBadCSV) || !isIOError(err) {
			return nil, nil, checkpoint{}, fmt.Errorf("%w: %w", ErrFailed, err)
		}
		return nil, nil, checkpoint{}, err
	}
	return rd, body, checkpoint{Pos: rd.Position()}, nil
}

// isIOError tells a failed read (worth a retry) from a file that cannot be imported.
func isIOError(err error) bool {
	return !errors.Is(err, csvimport.ErrBadCSV) && !errors.Is(err, csvimport.ErrRowTooLarge)
}

type runState struct {
	job      *Job // counters as committed
	ck       checkpoint
	errCount int
}

type chunk struct {
	products []map[string]any
	rows     []int // the row of each product
	errors   []RowError
	consumed int64 // rows read, good or bad
	skipped  int64
	next     checkpoint
	eof      bool
}

// readChunk reads up to chunkRows rows after the checkpoint from.
func (s *Service) readChunk(rd *csvimport.Reader, conv *converter, from checkpoint) (*chunk, error) {
	c := &chunk{next: from}
	c.next.First = maps(from.First)
	for c.consumed < int64(s.chunkRows) {
		cells, row, err := rd.Next()
		if err == io.EOF {
			c.eof = true
			break
		}
		var re *csvimport.RowError
		switch {
		case errors.As(err, &re):
			c.consumed++
			c.errors = append(c.errors, RowError{Row: re.Row, Message: rowMessage(re)})
			c.next.Pos = rd.Position()
			continue
		case errors.Is(err, csvimport.ErrRowTooLarge):
			return nil, fmt.Errorf("%w: %w", ErrFailed, err)
		case err != nil:
			return nil, fmt.Errorf("read the uploaded file: %w", err)
		}
		c.consumed++
		c.next.Pos = rd.Position()
		p, skip, msg := conv.product(cells, &c.next)
		switch {
		case skip:
			c.skipped++
		case msg != "":
			c.errors = append(c.errors, RowError{Row: row, Message: msg})
		default:
			c.products = append(c.products, p)
			c.rows = append(c.rows, row)
		}
	}
	return c, nil
}

func maps(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// rowMessage is a reader error without the "row N: " of its text (the row is given apart).
func rowMessage(re *csvimport.RowError) string { return re.Err.Error() }

// commit upserts the chunk's products and records its counters, errors and checkpoint in one
// transaction, provided the job is still where this attempt left it.
func (s *Service) commit(ctx context.Context, tenantID int64, st *runState, c *chunk) error {
	after := func(ctx context.Context, tx pgx.Tx, sum *catalog.BulkSummary) error {
		rowErrs := c.errors
		for i, r := range sum.Results {
			if r.Status != catalog.BulkFailed {
				continue
			}
			rowErrs = append(rowErrs, RowError{Row: c.rows[i], Message: r.Reason("row", c.rows)})
		}
		sort.SliceStable(rowErrs, func(a, b int) bool { return rowErrs[a].Row < rowErrs[b].Row })
		keep := append([]RowError{}, rowErrs[:min(len(rowErrs), max(0, MaxErrors-st.errCount))]...)
		newErrs, err := json.Marshal(keep)
		if err != nil {
			return err
		}
		ck, err := json.Marshal(c.next)
		if err != nil {
			return err
		}
		failed := int64(len(c.errors) + sum.Failed)
		status, total := StatusImporting, (*int64)(nil)
		processed := st.job.ProcessedRows + c.consumed
		if c.eof {
			status, total = StatusDone, &processed
		}
		now := s.now().UTC()
		tag, err := tx.Exec(ctx, `UPDATE import_jobs SET processed_rows = $4, created = created + $5, updated = updated + $6,
				unchanged = unchanged + $7, skipped_rows = skipped_rows + $8, failed_rows = failed_rows + $9,
				errors = errors || $10::jsonb, checkpoint = $11, status = $12, total_rows = COALESCE($13, total_rows),
				finished_at = CASE WHEN $12 = 'done' THEN $14 ELSE finished_at END, updated_at = $14
			WHERE tenant_id = $1 AND id = $2 AND status = 'importing' AND processed_rows = $3`,
			tenantID, st.job.JobID, st.job.ProcessedRows, processed, sum.Created, sum.Updated, sum.Unchanged, c.skipped,
			failed, newErrs, ck, status, total, now)
		if err != nil {
			return fmt.Errorf("record import progress: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return errSuperseded
		}
		j := st.job
		j.ProcessedRows = processed
		j.Created += int64(sum.Created)
		j.Updated += int64(sum.Updated)
		j.Unchanged += int64(sum.Unchanged)
		j.SkippedRows += c.skipped
		j.FailedRows += failed
		if c.eof {
			j.Status, j.TotalRows = StatusDone, processed
		}
		st.errCount += len(keep)
		st.ck = c.next
		return nil
	}
	if len(c.products) > 0 {
		_, err := s.catalog.BulkWith(ctx, tenantID, c.products, after)
		return err
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		return after(ctx, tx, &catalog.BulkSummary{})
	})
}

// converter turns a row's cells into a bulk product by the confirmed mapping.
type converter struct {
	cols   []column
	skuCol string
	opts   csvimport.ConvertOptions
	// Shopify exports list a product's variants as rows after its first one, leaving the
	// product's own columns (Title, Body, Vendor, Tags...) empty: those are filled from the
	// first row of the same Handle. Variant columns ("Variant ...", "Option1 Value", "Image
	// ...", "Cost per item") are each row's own. A row without a SKU in a Handle's group (an
	// extra image) is skipped.
	groupCol string
	fill     []string
}

type column struct {
	header, target, typ string
}

func newConverter(an *csvimport.Analysis, mapping map[string]*string, sc *catalog.Schema) (*converter, error) {
	types := make(map[string]string, len(sc.Fields))
	for _, f := range sc.Fields {
		types[f.Name] = f.Type
	}
	c := &converter{opts: an.Options}
	for _, h := range an.Headers {
		t := mapping[h]
		if t == nil {
			continue
		}
		col := column{header: h, target: *t}
		switch *t {
		case "sku":
			c.skuCol = h
		case "name":
		default:
			typ, ok := types[*t]
			if !ok {
				return nil, fmt.Errorf("%w: the mapping's field %q is no longer in the schema", ErrFailed, *t)
			}
			col.typ = typ
		}
		c.cols = append(c.cols, col)
	}
	if c.skuCol == "" {
		return nil, fmt.Errorf("%w: no header is mapped to sku", ErrFailed)
	}
	if t := mapping["Handle"]; isShopify(an.Headers) && (t == nil || *t != "sku") {
		c.groupCol = "Handle"
		for _, h := range an.Headers {
			if h != "Handle" && !shopifyVariantColumn(h) {
				c.fill = append(c.fill, h)
			}
		}
	}
	return c, nil
}

func isShopify(headers []string) bool {
	return slices.Contains(headers, "Handle") && slices.Contains(headers, "Variant SKU")
}

var optionValue = regexp.MustCompile(`^Option\d+ Value$`)

func shopifyVariantColumn(h string) bool {
	return strings.HasPrefix(h, "Variant ") || strings.HasPrefix(h, "Image ") || optionValue.MatchString(h) ||
		h == "Cost per item" || strings.HasPrefix(h, "Price / ") || strings.HasPrefix(h, "Compare At Price / ") ||
		strings.HasPrefix(h, "Included / ")
}

// product converts one row. It returns skip for a row with nothing to import, or the message
// of a row that cannot be imported.
func (c *converter) product(cells map[string]string, ck *checkpoint) (p map[string]any, skip bool, msg string) {
	continuation := false
	if c.groupCol != "" {
		g := strings.TrimSpace(cells[c.groupCol])
		switch {
		case g != "" && g == ck.Group:
			continuation = true
			for _, h := range c.fill {
				if strings.TrimSpace(cells[h]) == "" {
					cells[h] = ck.First[h]
				}
			}
		case g != "":
			ck.Group = g
			ck.First = make(map[string]string, len(c.fill))
			for _, h := range c.fill {
				if v := cells[h]; strings.TrimSpace(v) != "" {
					ck.First[h] = v
				}
			}
		}
	}
	sku := strings.TrimSpace(cells[c.skuCol])
	if sku == "" {
		if continuation {
			return nil, true, ""
		}
		if blank(cells, c.cols) {
			return nil, true, ""
		}
		return nil, false, fmt.Sprintf("no SKU: the %q cell is empty", c.skuCol)
	}
	p = make(map[string]any, len(c.cols))
	var problems []string
	for _, col := range c.cols {
		cell := cells[col.header]
		switch col.target {
		case "sku":
			p["sku"] = sku
		case "name":
			if v := strings.TrimSpace(cell); v != "" {
				p["name"] = v
			}
		default:
			v, err := csvimport.ConvertWith(col.typ, cell, c.opts)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%q (%s, %s): %s", col.header, col.target, col.typ,
					strings.TrimPrefix(err.Error(), csvimport.ErrInvalidValue.Error()+": ")))
				continue
			}
			if list, ok := v.([]string); ok { // the upsert takes data as JSON decodes it
				items := make([]any, len(list))
				for i, e := range list {
					items[i] = e
				}
				v = items
			}
			if v != nil {
				p[col.target] = v
			}
		}
	}
	if len(problems) > 0 {
		return nil, false, strings.Join(problems, "; ")
	}
	return p, false, ""
}

func blank(cells map[string]string, cols []column) bool {
	for _, col := range cols {
		if strings.TrimSpace(cells[col.header]) != "" {
			return false
		}
	}
	return true
}
