package prodseg

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cohort-dev/cohort/internal/catalog"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/startjob"

	"github.com/cohort-dev/cohort/internal/store"
)

// Statuses of a product segment.
//
//	draft      created, or the definition changed since the last compute (the members are those
//	           of computed_version, if any)
//	queued     a compute was requested
//	computing  the compute workflow is evaluating the definition
//	ready      the members are the current definition's
//	error      the last compute failed; last_error says why (the previous members are kept)
const (
	StatusDraft     = "draft"
	StatusQueued    = "queued"
	StatusComputing = "computing"
	StatusReady     = "ready"
	StatusError     = "error"
)

// Limits of product segment records and pages.
const (
	MaxNameLength        = 200
	MaxDescriptionLength = 4000
	MaxErrorLength       = 2000
	SampleSize           = 10  // SKUs a preview returns unless it asks for another limit
	MaxPreviewLimit      = 100 // the most SKUs a preview returns
	DefaultMembersLimit  = 50
	MaxMembersLimit      = 200
	PreviewTimeout       = 30 * time.Second
)

// Segment is the API's product segment record.
type Segment struct {
	ID          int64           `json:"id"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Definition  json.RawMessage `json:"definition"`
	// Version counts definition changes (1 on create); ComputedVersion is the version the
	// members were computed from (null before the first compute).
	Version         int        `json:"version"`
	Status          string     `json:"status"`
	ComputedCount   int64      `json:"computed_count"`
	ComputedVersion *int       `json:"computed_version"`
	LastComputedAt  *time.Time `json:"last_computed_at"`
	LastError       *string    `json:"last_error"`
	CreatedAt       time.Time  `json:"created_at"`
	UpdatedAt       time.Time  `json:"updated_at"`
}

const segmentColumns = "id, name, description, definition, version, status, computed_count, computed_version, last_computed_at, last_error, created_at, updated_at"

func scanSegment(row pgx.Row) (*Segment, error) {
	var s Segment
	var def []byte
	if err := row.Scan(&s.ID, &s.Name, &s.Description, &def, &s.Version, &s.Status, &s.ComputedCount,
		&s.ComputedVersion, &s.LastComputedAt, &s.LastError, &s.CreatedAt, &s.UpdatedAt); err != nil {
		return nil, err
	}
	// jsonb gives keys back sorted by length: re-encode in the language's order.
	s.Definition = json.RawMessage(def)
	if d, err := Parse(def); err == nil {
		s.Definition = d.JSON()
	}
	return &s, nil
}

// ComputeStarter starts a segment's compute workflow, or signals the one running (which joins
// the request or runs once more), and returns its id (workflows.Starter in
// production).
type ComputeStarter interface {
	StartCompute(ctx context.Context, tenantID, segmentID int64) (string, error)
}

// Service owns the product segments of every tenant.
type Service struct {
	pool    *pgxpool.Pool
	catalog *catalog.Service
	starter ComputeStarter // nil where computes are not requested (the worker)
	now     func() time.Time
}

// NewService builds the service; the catalogue service gives the tenants' product schemas, and
// RequestCompute starts computes with starter (nil in a process that only runs them: there
// RequestCompute answers 503).
func NewService(pool *pgxpool.Pool, cat *catalog.Service, starter ComputeStarter, now func() time.Time) *Service {
	return &Service{pool: pool, catalog: cat, starter: starter, now: now}
}

// startFailedMessage is the segment's last_error when its compute could not be started.
const startFailedMessage = "could not start the compute: the workflow service is unavailable"

// RequestCompute marks the segment queued (a segment already computing stays so; its workflow
// runs again after the current run) and starts or signals its compute workflow, returning the
// workflow id. When the workflow cannot be started the segment does not stay queued: it goes to
// error with the reason in last_error, and the error (503) says why. Once the segment is marked,
// the caller's cancellation no longer applies: the start and its undo run to completion within
// their timeouts.
func (s *Service) RequestCompute(ctx context.Context, tenantID, id int64) (string, error) {
	if s.starter == nil {
		return "", fmt.Errorf("%w: product segment computes cannot be started here", errs.ErrUnavailable)
	}
	var wf string
	err := startjob.RecordStartUndo(ctx, startjob.Detached,
		func(ctx context.Context) error {
			_, err := s.MarkQueued(ctx, tenantID, id)
			return err
		},
		func(ctx context.Context) (err error) {
			wf, err = s.starter.StartCompute(ctx, tenantID, id)
			return err
		},
		func(ctx context.Context) error {
			if err := s.unqueue(ctx, tenantID, id, startFailedMessage); err != nil {
				return fmt.Errorf("record the failed start of product segment %d: %w", id, err)
			}
			return nil
		})
	if err != nil {
		return "", err
	}
	return wf, nil
}

// unqueue records a compute that could not be started on a segment still queued (a segment the
// running workflow has moved on is left to it).
func (s *Service) unqueue(ctx context.Context, tenantID, id int64, msg string) error {
	_, err := s.pool.Exec(ctx, `UPDATE product_segments SET status = 'error', last_error = $3, updated_at = $4
		WHERE tenant_id = $1 AND id = $2 AND status = 'queued'`, tenantID, id, truncate(msg, MaxErrorLength), s.now().UTC())
	return err
}

// CreateInput is the body of POST /api/product-segments/.
type CreateInput struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Definition  json.RawMessage `json:"definition"`
}

// UpdateInput is the body of PATCH /api/product-segments/{id}/: only the fields present change.
type UpdateInput struct {
	Name        *string         `json:"name"`
	Description *string         `json:"description"`
	Definition  json.RawMessage `json:"definition"`
}

func checkText(f errs.Fields, field, v string, max int, required bool) {
	switch {
	case required && v == "":
		f.Add(field, "is required")
	case len(v) > max:
		f.Add(field, "is longer than %d bytes", max)
	case !utf8.ValidString(v) || strings.ContainsRune(v, 0):
		f.Add(field, "must be valid UTF-8 text")
	}
}

// validate parses a definition (errors under "definition.") and checks it against the tenant's
// schema; it returns the canonical JSON.
func (s *Service) validate(ctx context.Context, tenantID int64, raw json.RawMessage) ([]byte, error) {
	def, err := Parse(raw)
	if err != nil {
		return nil, withPrefix(err, "definition")
	}
	sc, err := s.catalog.Schema(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	if _, err := Compile(def, sc, tenantID); err != nil {
		return nil, withPrefix(err, "definition")
	}
	return def.JSON(), nil
}

func nameConflict(err error, name string) error {
	var pg *pgconn.PgError
	if errors.As(err, &pg) && pg.Code == "23505" && pg.ConstraintName == "product_segments_name_idx" {
		return errs.Coded(errs.ErrConflict, "name_exists", "a product segment named %q exists (names are case-insensitive)", name)
	}
	return err
}

// Create stores a segment (status draft, version 1) after checking its definition against the
// tenant's schema. Names are unique per tenant, case-insensitively (409 name_exists).
func (s *Service) Create(ctx context.Context, tenantID int64, in CreateInput) (*Segment, error) {
	f := errs.Fields{}
	in.Name = strings.TrimSpace(in.Name)
	checkText(f, "name", in.Name, MaxNameLength, true)
	checkText(f, "description", in.Description, MaxDescriptionLength, false)
	if len(in.Definition) == 0 || string(in.Definition) == "null" {
		f.Add("definition", "is required: {\"logic\": \"AND\", \"conditions\": [{\"field\", \"operator\", \"value\"}]}")
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	def, err := s.validate(ctx, tenantID, in.Definition)
	if err != nil {
		return nil, err
	}
	now := s.now().UTC()
	seg, err := scanSegment(s.pool.QueryRow(ctx, `INSERT INTO product_segments
		(tenant_id, name, name_key, description, definition, version, status, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, 1, 'draft', $6, $6) RETURNING `+segmentColumns,
		tenantID, in.Name, fold(in.Name), in.Description, string(def), now))
	if err != nil {
		return nil, fmt.Errorf("create product segment: %w", nameConflict(err, in.Name))
	}
	return seg, nil
}

// List returns the tenant's segments in id order (oldest first).
func (s *Service) List(ctx context.Context, tenantID int64) ([]*Segment, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+segmentColumns+" FROM product_segments WHERE tenant_id = $1 ORDER BY id", tenantID)
	if err != nil {
		return nil, fmt.Errorf("list product segments: %w", err)
	}
	defer rows.Close()
	out := []*Segment{}
	for rows.Next() {
		seg, err := scanSegment(rows)
		if err != nil {
			return nil, fmt.Errorf("list product segments: %w", err)
		}
		out = append(out, seg)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list product segments: %w", err)
	}
	return out, nil
}

func notFound(id int64) error { return fmt.Errorf("product segment %d: %w", id, errs.ErrNotFound) }

// Get returns one of the tenant's segments; another tenant's is ErrNotFound.
func (s *Service) Get(ctx context.Context, tenantID, id int64) (*Segment, error) {
	seg, err := scanSegment(s.pool.QueryRow(ctx, "SELECT "+segmentColumns+" FROM product_segments WHERE tenant_id = $1 AND id = $2", tenantID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("load product segment %d: %w", id, err)
	}
	return seg, nil
}

// Update applies a PATCH. A definition that differs from the stored one (canonically) becomes
// the next version and makes the segment stale: status draft, last_error cleared, the members
// and computed_count of the previous compute kept until the next one (computed_version tells
// which version they are).
func (s *Service) Update(ctx context.Context, tenantID, id int64, in UpdateInput) (*Segment, error) {
	f := errs.Fields{}
	if in.Name != nil {
		*in.Name = strings.TrimSpace(*in.Name)
		checkText(f, "name", *in.Name, MaxNameLength, true)
	}
	if in.Description != nil {
		checkText(f, "description", *in.Description, MaxDescriptionLength, false)
	}
	if string(in.Definition) == "null" {
		f.Add("definition", "cannot be removed; send a new definition")
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	var def []byte
	if len(in.Definition) > 0 {
		var err error
		if def, err = s.validate(ctx, tenantID, in.Definition); err != nil {
			return nil, err
		}
	}
	var out *Segment
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// NO KEY UPDATE: a compute in progress holds the row KEY SHARE (its members' foreign
		// key) and must not hold up a PATCH.
		cur, err := scanSegment(tx.QueryRow(ctx, "SELECT "+segmentColumns+" FROM product_segments WHERE tenant_id = $1 AND id = $2 FOR NO KEY UPDATE", tenantID, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return notFound(id)
		}
		if err != nil {
			return fmt.Errorf("load product segment %d: %w", id, err)
		}
		name, desc := cur.Name, cur.Description
		if in.Name != nil {
			name = *in.Name
		}
		if in.Description != nil {
			desc = *in.Description
		}
		defChanged := def != nil && !bytes.Equal(def, cur.Definition)
		if name == cur.Name && desc == cur.Description && !defChanged {
			out = cur
			return nil
		}
		now := s.now().UTC()
		if defChanged {
			out, err = scanSegment(tx.QueryRow(ctx, `UPDATE product_segments SET name = $3, name_key = $4, description = $5,
				definition = $6, version = version + 1, status = 'draft', last_error = NULL, updated_at = $7
				WHERE tenant_id = $1 AND id = $2 RETURNING `+segmentColumns, tenantID, id, name, fold(name), desc, string(def), now))
		} else {
			out, err = scanSegment(tx.QueryRow(ctx, `UPDATE product_segments SET name = $3, name_key = $4, description = $5, updated_at = $6
				WHERE tenant_id = $1 AND id = $2 RETURNING `+segmentColumns, tenantID, id, name, fold(name), desc, now))
		}
		if err != nil {
			return fmt.Errorf("update product segment %d: %w", id, nameConflict(err, name))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Delete removes a segment and its members.
func (s *Service) Delete(ctx context.Context, tenantID, id int64) error {
	return store.DeleteOwned(ctx, s.pool, "product_segments", tenantID, id, notFound(id))
}

// Preview is the answer of POST /api/product-segments/preview/.
type Preview struct {
	MatchedCount int64    `json:"matched_count"`
	SampleSKUs   []string `json:"sample_skus"`
	// SQL is the membership query with its placeholders; Params are their values ($1 is the
	// caller's tenant id).
	SQL    string `json:"sql"`
	Params []any  `json:"params"`
}

// parsePreviewBody reads a preview request in either form: {"definition": ..., "limit": n} (as
// the segment preview takes it; recognised by its top-level "definition" key, which no
// definition has) or the bare definition. It returns the definition, the sample limit, and the
// prefix of the definition's field errors ("definition" in the wrapped form, none bare).
func parsePreviewBody(body []byte) (json.RawMessage, int, string, error) {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil || top["definition"] == nil {
		return body, SampleSize, "", nil
	}
	f := errs.Fields{}
	limit := SampleSize
	for k, v := range top {
		switch k {
		case "definition":
			if string(v) == "null" {
				f.Add("definition", "is required: {\"logic\": \"AND\", \"conditions\": [{\"field\", \"operator\", \"value\"}]}")
			}
		case "limit":
			if string(v) == "null" {
				continue
			}
			n, err := strconv.Atoi(string(bytes.TrimSpace(v)))
			if err != nil || n < 0 || n > MaxPreviewLimit {
				f.Add("limit", "must be an integer from 0 to %d", MaxPreviewLimit)
				continue
			}
			limit = n
		default:
			f.Add(k, "is not a field of a preview request: send {\"definition\", \"limit\"}")
		}
	}
	if err := f.Err(); err != nil {
		return nil, 0, "", err
	}
	return top["definition"], limit, "definition", nil
}

// Preview evaluates a definition over the tenant's products without storing anything: the
// number of matches, the SKUs of the first limit (default SampleSize, at most MaxPreviewLimit) in
// id order, and the SQL. The body is {"definition": ..., "limit": n} or the bare definition;
// field errors are keyed by their path in the body ("definition.conditions[1].value", or
// "conditions[1].value" for a bare definition).
func (s *Service) Preview(ctx context.Context, tenantID int64, body []byte) (*Preview, error) {
	raw, limit, prefix, err := parsePreviewBody(body)
	if err != nil {
		return nil, err
	}
	def, err := Parse(raw)
	if err != nil {
		return nil, withPrefix(err, prefix)
	}
	sc, err := s.catalog.Schema(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	q, err := Compile(def, sc, tenantID)
	if err != nil {
		return nil, withPrefix(err, prefix)
	}
	ctx, cancel := context.WithTimeout(ctx, PreviewTimeout)
	defer cancel()
	out := &Preview{SampleSKUs: []string{}, SQL: q.SQL(), Params: q.Args}
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		// Product reads are random reads on SSDs, and planned for the values at hand (a generic
		// plan of a prepared statement cannot tell a rare name from a common one), as the product
		// list says.
		if _, err := tx.Exec(ctx, "SET LOCAL random_page_cost = 1.1; SET LOCAL plan_cache_mode = force_custom_plan"); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM products p WHERE "+q.Where, q.Args...).Scan(&out.MatchedCount); err != nil {
			return err
		}
		if out.MatchedCount == 0 || limit == 0 {
			return nil
		}
		args := append(append([]any{}, q.Args...), limit)
		rows, err := tx.Query(ctx, fmt.Sprintf("SELECT p.sku FROM products p WHERE %s ORDER BY p.id LIMIT $%d", q.Where, len(args)), args...)
		if err != nil {
			return err
		}
		out.SampleSKUs, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, errs.Coded(errs.ErrUnavailable, "preview_timeout", "the preview did not finish within %s; narrow the definition", PreviewTimeout)
		}
		return nil, fmt.Errorf("preview product segment: %w", err)
	}
	return out, nil
}

// MarkQueued records that a compute was requested (a segment already computing stays so; its
// workflow runs again after the current run).
func (s *Service) MarkQueued(ctx context.Context, tenantID, id int64) (*Segment, error) {
	seg, err := scanSegment(s.pool.QueryRow(ctx, `UPDATE product_segments
		SET status = CASE WHEN status = 'computing' THEN status ELSE 'queued' END, updated_at = $3
		WHERE tenant_id = $1 AND id = $2 RETURNING `+segmentColumns, tenantID, id, s.now().UTC()))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("queue product segment %d: %w", id, err)
	}
	return seg, nil
}

// MarkError records a failed compute (or a compute that could not start): status error and the
// message in last_error. A segment deleted meanwhile is no error.
func (s *Service) MarkError(ctx context.Context, tenantID, id int64, msg string) error {
	_, err := s.pool.Exec(ctx, `UPDATE product_segments SET status = 'error', last_error = $3, updated_at = $4
		WHERE tenant_id = $1 AND id = $2`, tenantID, id, truncate(msg, MaxErrorLength), s.now().UTC())
	if err != nil {
		return fmt.Errorf("record product segment %d failure: %w", id, err)
	}
	return nil
}

// BeginCompute marks the segment computing.
func (s *Service) BeginCompute(ctx context.Context, tenantID, id int64) error {
	tag, err := s.pool.Exec(ctx, `UPDATE product_segments SET status = 'computing', updated_at = $3
		WHERE tenant_id = $1 AND id = $2`, tenantID, id, s.now().UTC())
	if err != nil {
		return fmt.Errorf("begin product segment %d compute: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return notFound(id)
	}
	return nil
}

// ComputeResult is one finished compute.
type ComputeResult struct {
	Matched int64 // the members now (computed_count)
	Added   int64 // products that entered
	Removed int64 // products that left
	Version int   // the definition version computed
	// Stale: the definition changed while the compute ran; the segment stays draft (or queued).
	Stale bool
}

// Compute evaluates the segment's definition over the tenant's products and replaces its members
// with the matches, in one transaction: the matches are computed once in a single statement that
// also deletes the members that no longer match and inserts the new ones (a diff, so a large
// unchanged membership costs no writes), and the segment gets computed_count, computed_version,
// last_computed_at and status ready (draft stays when the definition changed meanwhile).
// Computes of one segment never overlap (an advisory lock). A definition the schema no longer
// accepts (a field removed or retyped) is an *errs.ValidationError.
func (s *Service) Compute(ctx context.Context, tenantID, id int64) (ComputeResult, error) {
	var res ComputeResult
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		key, err := store.LockKey(store.LockProductSegmentCompute, id)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", key); err != nil {
			return fmt.Errorf("lock product segment %d: %w", id, err)
		}
		var raw []byte
		err = tx.QueryRow(ctx, "SELECT definition, version FROM product_segments WHERE tenant_id = $1 AND id = $2", tenantID, id).Scan(&raw, &res.Version)
		if errors.Is(err, pgx.ErrNoRows) {
			return notFound(id)
		}
		if err != nil {
			return fmt.Errorf("load product segment %d: %w", id, err)
		}
		def, err := Parse(raw)
		if err != nil {
			return err
		}
		sc, err := s.catalog.Schema(ctx, tenantID)
		if err != nil {
			return err
		}
		q, err := Compile(def, sc, tenantID)
		var ve *errs.ValidationError
		if errors.As(err, &ve) {
			return &errs.ValidationError{Msg: "the definition no longer fits the product schema", Fields: ve.Fields}
		}
		if err != nil {
			return err
		}
		n := len(q.Args)
		args := append(append([]any{}, q.Args...), id)
		seg := "$" + strconv.Itoa(n+1)
		// Planner statistics of the members lag behind a large compute (a first compute inserts
		// every member; autovacuum analyses later), and a nested loop planned for "2 rows" over
		// 100k members is quadratic: this statement only ever needs hash or merge joins.
		if _, err := tx.Exec(ctx, "SET LOCAL enable_nestloop = off"); err != nil {
			return fmt.Errorf("store product segment %d members: %w", id, err)
		}
		// One statement, one snapshot: the delete and the insert see the same matches. The diff is
		// a full join of the matches and the current members (hash or merge, linear), so an
		// unchanged membership costs two scans and no writes.
		err = tx.QueryRow(ctx, `WITH matched AS MATERIALIZED (
				SELECT p.id FROM products p WHERE `+q.Where+`
			), current AS MATERIALIZED (
				SELECT product_id AS id FROM product_segment_members WHERE tenant_id = $1 AND segment_id = `+seg+`
			), diff AS MATERIALIZED (
				SELECT coalesce(m.id, c.id) AS id, c.id IS NULL AS entered
				FROM matched m FULL JOIN current c ON c.id = m.id
				WHERE m.id IS NULL OR c.id IS NULL
			), removed AS (
				DELETE FROM product_segment_members x USING diff d
				WHERE x.tenant_id = $1 AND x.segment_id = `+seg+` AND x.product_id = d.id AND NOT d.entered
				RETURNING 1
			), added AS (
				INSERT INTO product_segment_members (tenant_id, segment_id, product_id)
				SELECT $1, `+seg+`, id FROM diff WHERE entered
				ON CONFLICT DO NOTHING
				RETURNING 1
			)
			SELECT (SELECT count(*) FROM matched), (SELECT count(*) FROM added), (SELECT count(*) FROM removed)`, args...).
			Scan(&res.Matched, &res.Added, &res.Removed)
		if err != nil {
			return fmt.Errorf("store product segment %d members: %w", id, err)
		}
		var status string
		err = tx.QueryRow(ctx, `UPDATE product_segments SET computed_count = $3, computed_version = $4, last_computed_at = $5,
			last_error = NULL, updated_at = $5, status = CASE WHEN version = $4 THEN 'ready' ELSE status END
			WHERE tenant_id = $1 AND id = $2 RETURNING status`, tenantID, id, res.Matched, res.Version, s.now().UTC()).Scan(&status)
		if errors.Is(err, pgx.ErrNoRows) {
			return notFound(id)
		}
		if err != nil {
			return fmt.Errorf("update product segment %d: %w", id, err)
		}
		res.Stale = status != StatusReady
		return nil
	})
	if err != nil {
		return ComputeResult{}, err
	}
	return res, nil
}

// MembersPage is one page of GET /api/product-segments/{id}/members/.
type MembersPage struct {
	Results []*catalog.Product `json:"results"`
	// NextCursor is the offset of the next page, null on the last page.
	NextCursor *int64 `json:"next_cursor"`
}

// Members returns a page of the last computed members in product id order: the snapshot's
// product ids from offset cursor, as the products are now. A product deleted since the compute
// is left out (its page holds one product fewer; offsets stay those of the snapshot, so no
// product is skipped or repeated). Before the first compute the page is empty (status and
// last_computed_at say why).
func (s *Service) Members(ctx context.Context, tenantID, id, cursor int64, limit int) (*MembersPage, error) {
	f := errs.Fields{}
	if cursor < 0 {
		f.Add("cursor", "must be an offset of 0 or more (the next_cursor of the previous page)")
	}
	if limit < 1 || limit > MaxMembersLimit {
		f.Add("limit", "must be an integer from 1 to %d", MaxMembersLimit)
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	var one int
	err := s.pool.QueryRow(ctx, "SELECT 1 FROM product_segments WHERE tenant_id = $1 AND id = $2", tenantID, id).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("load product segment %d: %w", id, err)
	}
	// The offset runs over the members' primary key alone (no product is read for the rows it
	// skips); limit+1 ids say whether a next page exists.
	rows, err := s.pool.Query(ctx, `SELECT product_id FROM product_segment_members WHERE tenant_id = $1 AND segment_id = $2
		ORDER BY product_id LIMIT $3 OFFSET $4`, tenantID, id, limit+1, cursor)
	if err != nil {
		return nil, fmt.Errorf("read product segment %d members: %w", id, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("read product segment %d members: %w", id, err)
	}
	out := &MembersPage{Results: []*catalog.Product{}}
	if len(ids) > limit {
		ids = ids[:limit]
		next := cursor + int64(limit)
		out.NextCursor = &next
	}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err = s.pool.Query(ctx, `SELECT id, sku, name, data, created_at, updated_at FROM products
		WHERE tenant_id = $1 AND id = ANY($2::bigint[]) ORDER BY id`, tenantID, ids)
	if err != nil {
		return nil, fmt.Errorf("read product segment %d members: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var p catalog.Product
		var data []byte
		if err := rows.Scan(&p.ID, &p.SKU, &p.Name, &data, &p.CreatedAt, &p.UpdatedAt); err != nil {
			return nil, fmt.Errorf("read product segment %d members: %w", id, err)
		}
		p.Data = map[string]any{}
		_ = json.Unmarshal(data, &p.Data)
		out.Results = append(out.Results, &p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read product segment %d members: %w", id, err)
	}
	return out, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "..."
}
