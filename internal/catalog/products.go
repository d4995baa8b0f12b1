package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cohort-dev/cohort/internal/errs"

	"github.com/cohort-dev/cohort/internal/store"
)

// Product is the API's product record.
type Product struct {
	ID        int64          `json:"id"`
	SKU       string         `json:"sku"`
	Name      string         `json:"name"`
	Data      map[string]any `json:"data"`
	CreatedAt time.Time      `json:"created_at"`
	UpdatedAt time.Time      `json:"updated_at"`
}

// Product limits.
const (
	MaxSKULength  = 255
	MaxNameLength = 500
)

// ProductInput is the body of POST /api/pim/products/.
type ProductInput struct {
	SKU  string          `json:"sku"`
	Name string          `json:"name"`
	Data json.RawMessage `json:"data"`
}

// ProductPatch is the body of PATCH /api/pim/products/{id}/: data is merged field by field (null
// removes a field).
type ProductPatch struct {
	Name *string         `json:"name"`
	Data json.RawMessage `json:"data"`
}

const productColumns = "id, sku, name, data, created_at, updated_at"

func scanProduct(row pgx.Row) (*Product, error) {
	var p Product
	var data []byte
	if err := row.Scan(&p.ID, &p.SKU, &p.Name, &data, &p.CreatedAt, &p.UpdatedAt); err != nil {
		return nil, err
	}
	p.Data = map[string]any{}
	_ = json.Unmarshal(data, &p.Data)
	return &p, nil
}

func checkSKU(f errs.Fields, key, sku string) {
	switch {
	case sku == "":
		f.Add(key, "is required")
	case len(sku) > MaxSKULength || !validText(sku) || strings.ContainsFunc(sku, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		f.Add(key, "must be text of at most %d bytes without control characters", MaxSKULength)
	}
}

func checkName(f errs.Fields, key, name string) {
	switch {
	case name == "":
		f.Add(key, "is required")
	case len(name) > MaxNameLength || !validText(name):
		f.Add(key, "must be text of at most %d bytes", MaxNameLength)
	}
}

// checkData validates data fields against the schema (errors keyed prefix + field) and returns
// them normalised; a null value means "remove" and is kept as nil for merges.
func checkData(sc *Schema, f errs.Fields, prefix string, data map[string]any) map[string]any {
	out := make(map[string]any, len(data))
	for name, v := range data {
		fd, ok := sc.field(name)
		if !ok {
			if slices.Contains(BuiltIn, name) {
				f.Add(prefix+name, "is a top-level product field, not a data field")
			} else {
				f.Add(prefix+name, "is not a field of the product schema (add it with PUT /api/pim/schema/)")
			}
			continue
		}
		if v == nil {
			out[name] = nil
			continue
		}
		nv, msg := checkValue(fd.Type, v)
		if msg != "" {
			f.Add(prefix+name, "%s (%s field)", msg, fd.Type)
			continue
		}
		out[name] = nv
	}
	return out
}

// checkRequired reports required fields missing from the final data.
func checkRequired(sc *Schema, f errs.Fields, prefix string, data map[string]any) {
	for _, fd := range sc.Fields {
		if v, ok := data[fd.Name]; fd.Required && (!ok || v == nil) {
			f.Add(prefix+fd.Name, "is required by the product schema")
		}
	}
}

func decodeData(raw json.RawMessage, f errs.Fields) map[string]any {
	if len(raw) == 0 || string(raw) == "null" {
		return map[string]any{}
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		f.Add("data", "must be an object")
		return map[string]any{}
	}
	return m
}

// merge applies a patch to data: values replace, nil removes.
func merge(data, patch map[string]any) map[string]any {
	out := make(map[string]any, len(data)+len(patch))
	for k, v := range data {
		out[k] = v
	}
	for k, v := range patch {
		if v == nil {
			delete(out, k)
		} else {
			out[k] = v
		}
	}
	return out
}

// lockSchemaShared makes a product write wait for a schema change in progress (and the other
// way round), so data is always checked against the schema that is stored.
func lockSchemaShared(ctx context.Context, tx pgx.Tx, tenantID int64) (*Schema, error) {
	key, err := store.LockKey(store.LockCatalogSchema, tenantID)
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock_shared($1)", key); err != nil {
		return nil, fmt.Errorf("lock product schema: %w", err)
	}
	return loadSchema(ctx, tx, tenantID)
}

func skuConflict(err error, sku string) error {
	var pg *pgconn.PgError
	if errors.As(err, &pg) && pg.Code == "23505" {
		return errs.Coded(errs.ErrConflict, "sku_exists", "a product with sku %q exists (SKUs are case-insensitive)", sku)
	}
	return err
}

// Create stores a product; a SKU the tenant has (in any case) is a conflict.
func (s *Service) Create(ctx context.Context, tenantID int64, in ProductInput) (*Product, error) {
	var out *Product
	err := s.inTx(ctx, tenantID, func(tx pgx.Tx) error {
		sc, err := lockSchemaShared(ctx, tx, tenantID)
		if err != nil {
			return err
		}
		f := errs.Fields{}
		in.SKU, in.Name = strings.TrimSpace(in.SKU), strings.TrimSpace(in.Name)
		checkSKU(f, "sku", in.SKU)
		checkName(f, "name", in.Name)
		data := merge(nil, checkData(sc, f, "data.", decodeData(in.Data, f)))
		checkRequired(sc, f, "data.", data)
		if err := f.Err(); err != nil {
			return err
		}
		enc, _ := json.Marshal(data)
		now := s.now().UTC()
		out, err = scanProduct(tx.QueryRow(ctx, `INSERT INTO products (tenant_id, sku, name, sku_key, name_key, data, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $7) RETURNING `+productColumns,
			tenantID, in.SKU, in.Name, fold(in.SKU), fold(in.Name), enc, now))
		if err != nil {
			return skuConflict(err, in.SKU)
		}
		return queueEmbeddings(ctx, tx, tenantID, now, []int64{out.ID})
	})
	if err != nil {
		return nil, err
	}
	s.kickEmbeddings(ctx, tenantID)
	return out, nil
}

// Get returns one of the tenant's products; another tenant's is ErrNotFound.
func (s *Service) Get(ctx context.Context, tenantID, id int64) (*Product, error) {
	p, err := scanProduct(s.pool.QueryRow(ctx, "SELECT "+productColumns+" FROM products WHERE tenant_id = $1 AND id = $2", tenantID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("product %d: %w", id, errs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("load product %d: %w", id, err)
	}
	return p, nil
}

// Update applies a PATCH: name, and data merged field by field.
func (s *Service) Update(ctx context.Context, tenantID, id int64, in ProductPatch) (*Product, error) {
	var out *Product
	queued := false
	err := s.inTx(ctx, tenantID, func(tx pgx.Tx) error {
		sc, err := lockSchemaShared(ctx, tx, tenantID)
		if err != nil {
			return err
		}
		cur, err := scanProduct(tx.QueryRow(ctx, "SELECT "+productColumns+" FROM products WHERE tenant_id = $1 AND id = $2 FOR UPDATE", tenantID, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("product %d: %w", id, errs.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("load product %d: %w", id, err)
		}
		f := errs.Fields{}
		name := cur.Name
		if in.Name != nil {
			name = strings.TrimSpace(*in.Name)
			checkName(f, "name", name)
		}
		data := cur.Data
		if len(in.Data) > 0 {
			data = merge(cur.Data, checkData(sc, f, "data.", decodeData(in.Data, f)))
			checkRequired(sc, f, "data.", data)
		}
		if err := f.Err(); err != nil {
			return err
		}
		if name == cur.Name && sameValue(data, cur.Data) {
			out = cur
			return nil
		}
		enc, _ := json.Marshal(data)
		out, err = scanProduct(tx.QueryRow(ctx, `UPDATE products SET name = $3, name_key = $4, data = $5, updated_at = $6
			WHERE tenant_id = $1 AND id = $2 RETURNING `+productColumns, tenantID, id, name, fold(name), enc, s.now().UTC()))
		if err != nil || EmbeddingText(sc, name, data) == EmbeddingText(sc, cur.Name, cur.Data) {
			return err
		}
		queued = true
		return queueEmbeddings(ctx, tx, tenantID, s.now().UTC(), []int64{id})
	})
	if err != nil {
		return nil, err
	}
	if queued {
		s.kickEmbeddings(ctx, tenantID)
	}
	return out, nil
}

// Delete removes a product.
func (s *Service) Delete(ctx context.Context, tenantID, id int64) error {
	return s.inTx(ctx, tenantID, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "DELETE FROM products WHERE tenant_id = $1 AND id = $2", tenantID, id)
		if err != nil {
			return fmt.Errorf("delete product %d: %w", id, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("product %d: %w", id, errs.ErrNotFound)
		}
		return nil
	})
}

// List limits.
const (
	DefaultPageSize = 50
	MaxPageSize     = 200
)

// ListQuery is GET /api/pim/products/: q (name contains, case-insensitive), exact matches on
// data fields (typed by the schema; array fields match any element), page and page_size.
type ListQuery struct {
	Q        string
	Filters  map[string]string
	Page     int
	PageSize int
}

// Page is one page of products.
type Page struct {
	Results    []*Product `json:"results"`
	Page       int        `json:"page"`
	PageSize   int        `json:"page_size"`
	Total      int64      `json:"total"`
	TotalPages int64      `json:"total_pages"`
}

// List returns a page of the tenant's products in id order.
func (s *Service) List(ctx context.Context, tenantID int64, q ListQuery) (*Page, error) {
	// The schema types the field filters; a plain page or name search does not need it.
	sc := &Schema{}
	var err error
	if len(q.Filters) > 0 {
		if sc, err = s.Schema(ctx, tenantID); err != nil {
			return nil, err
		}
	}
	f := errs.Fields{}
	if q.Page == 0 {
		q.Page = 1
	}
	if q.PageSize == 0 {
		q.PageSize = DefaultPageSize
	}
	if q.Page < 1 {
		f.Add("page", "must be a positive integer")
	}
	if q.PageSize < 1 || q.PageSize > MaxPageSize {
		f.Add("page_size", "must be an integer from 1 to %d", MaxPageSize)
	}
	if len(q.Q) > MaxNameLength || !validText(q.Q) {
		f.Add("q", "must be text of at most %d bytes", MaxNameLength)
	}
	where := []string{"tenant_id = $1"}
	args := []any{tenantID}
	containment := map[string]any{}
	for name, raw := range q.Filters {
		fd, ok := sc.field(name)
		if !ok {
			f.Add(name, "is not a filter: use q, page, page_size or a field of the product schema")
			continue
		}
		v, msg := filterValue(fd, raw)
		if msg != "" {
			f.Add(name, "%s", msg)
			continue
		}
		containment[name] = v
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	if len(containment) > 0 {
		enc, _ := json.Marshal(containment)
		args = append(args, string(enc))
		where = append(where, fmt.Sprintf("data @> $%d::jsonb", len(args)))
	}
	if q.Q != "" {
		args = append(args, "%"+likeEscape(fold(q.Q))+"%")
		where = append(where, fmt.Sprintf("name_key LIKE $%d", len(args)))
	}
	cond := strings.Join(where, " AND ")
	out := &Page{Results: []*Product{}, Page: q.Page, PageSize: q.PageSize}
	offset := int64(q.Page-1) * int64(q.PageSize)
	// The count is the costly part of a filtered page: it is cached per condition and catalogue
	// version (see inTx). Without a cached count, the page and the count run at once, on two
	// connections, each in one round trip.
	key := countKey(cond, args)
	cached, have := s.counts.get(key)
	var counted chan error
	var fresh cachedCount
	count := func() error {
		var err error
		if fresh, err = countProducts(ctx, s.pool, cond, args); err == nil {
			s.counts.put(key, fresh)
		}
		return err
	}
	if !have {
		counted = make(chan error, 1)
		go func() { counted <- count() }()
	}
	var version int64
	pageArgs := append(slices.Clip(args), q.PageSize, offset)
	err = readOnly(ctx, s.pool, stmt{sql: "SELECT " + versionSQL, args: []any{tenantID}, read: func(br pgx.BatchResults) error {
		return br.QueryRow().Scan(&version)
	}}, stmt{sql: fmt.Sprintf("SELECT %s FROM products WHERE %s ORDER BY id LIMIT $%d OFFSET $%d",
		productColumns, cond, len(pageArgs)-1, len(pageArgs)), args: pageArgs, read: func(br pgx.BatchResults) error {
		rows, err := br.Query()
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			p, err := scanProduct(rows)
			if err != nil {
				return err
			}
			out.Results = append(out.Results, p)
		}
		return rows.Err()
	}})
	var cerr error
	if counted != nil {
		cerr = <-counted
	}
	if err != nil {
		return nil, fmt.Errorf("list products: %w", err)
	}
	n := len(out.Results)
	switch {
	case n > 0 && n < q.PageSize:
		// A page that is not full (and not past the end) is the last one: the total is exact in
		// the page's own snapshot.
		out.Total = offset + int64(n)
	case have && cached.version == version:
		out.Total = cached.total
	default:
		if have {
			// Written since it was counted: count again.
			cerr = count()
		}
		if cerr != nil {
			return nil, fmt.Errorf("count products: %w", cerr)
		}
		out.Total = fresh.total
	}
	out.TotalPages = (out.Total + int64(q.PageSize) - 1) / int64(q.PageSize)
	return out, nil
}

// stmt is one statement of a read and the reading of its results.
type stmt struct {
	sql  string
	args []any
	read func(pgx.BatchResults) error
}

// readOnly runs a catalogue read in a single round trip: BEGIN, the planner setting, the
// statements (one snapshot for all: repeatable read) and COMMIT are sent together.
func readOnly(ctx context.Context, pool *pgxpool.Pool, stmts ...stmt) error {
	var b pgx.Batch
	b.Queue("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
	// Product pages are random reads on SSDs: with the default cost the planner reads every name
	// match from the heap instead of intersecting the name and data indexes first.
	b.Queue("SET LOCAL random_page_cost = 1.1")
	// Planned for the values at hand: a generic plan of a prepared page query cannot tell a rare
	// name from a common one, and once chosen it sorted every match of "linen" for 50 of them.
	b.Queue("SET LOCAL plan_cache_mode = force_custom_plan")
	for _, st := range stmts {
		b.Queue(st.sql, st.args...)
	}
	b.Queue("COMMIT")
	br := pool.SendBatch(ctx, &b)
	err := func() error {
		for range 3 {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		for _, st := range stmts {
			if err := st.read(br); err != nil {
				return err
			}
		}
		_, err := br.Exec()
		return err
	}()
	// Closing reads what is left; a connection left inside a transaction is not reused by the pool.
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// filterValue is the containment value of a query-string filter on fd: typed, so price=10
// matches the number 10 and tags=red an array holding "red".
func filterValue(fd Field, raw string) (any, string) {
	switch fd.Type {
	case TypeNumber, TypePrice, TypeInteger:
		n, err := strconv.ParseFloat(strings.TrimSpace(raw), 64)
		if err != nil {
			return nil, "must be a number (" + fd.Type + " field)"
		}
		v, msg := checkValue(fd.Type, n)
		return v, msg
	case TypeBoolean:
		b, err := strconv.ParseBool(strings.TrimSpace(raw))
		if err != nil {
			return nil, "must be true or false (boolean field)"
		}
		return b, ""
	case TypeArray:
		s, msg := checkString(TypeString, raw)
		return []any{s}, msg
	}
	return checkString(fd.Type, raw)
}

func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// fold is the case-insensitive key of a SKU or name (stored as sku_key and name_key): Unicode
// lower case computed here, so it does not depend on the database's collation.
func fold(s string) string { return strings.ToLower(s) }
