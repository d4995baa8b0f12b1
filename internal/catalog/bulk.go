package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cohort-dev/cohort/internal/errs"
)

// MaxBulk is the most products one bulk call takes.
const MaxBulk = 1000

// Bulk item statuses.
const (
	BulkCreated   = "created"
	BulkUpdated   = "updated"
	BulkUnchanged = "unchanged"
	BulkFailed    = "failed"
)

// BulkResult is one product's outcome.
type BulkResult struct {
	Index  int    `json:"index"`
	SKU    string `json:"sku"`
	Status string `json:"status"`
	ID     int64  `json:"id,omitempty"`
	Error  string `json:"error,omitempty"`
	// Fields are the field-level problems of a failed product.
	Fields map[string]string `json:"fields,omitempty"`
}

var bulkIndex = regexp.MustCompile(`products\[(\d+)\]`)

// Reason words why a product was refused for a caller that knows the products by something other
// than their index in the upsert (a CSV row, a feed position): every products[i] in the messages
// becomes label + " " + ids[i] ("row 12"), and the field problems are joined in field order.
func (r BulkResult) Reason(label string, ids []int) string {
	rename := func(s string) string {
		return bulkIndex.ReplaceAllStringFunc(s, func(m string) string {
			i, err := strconv.Atoi(bulkIndex.FindStringSubmatch(m)[1])
			if err != nil || i < 0 || i >= len(ids) {
				return m
			}
			return label + " " + strconv.Itoa(ids[i])
		})
	}
	if len(r.Fields) == 0 {
		return rename(r.Error)
	}
	keys := make([]string, 0, len(r.Fields))
	for k := range r.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + ": " + rename(r.Fields[k])
	}
	return strings.Join(parts, "; ")
}

// BulkSummary is the answer of POST /api/pim/products/bulk/.
type BulkSummary struct {
	Created   int          `json:"created"`
	Updated   int          `json:"updated"`
	Unchanged int          `json:"unchanged"`
	Failed    int          `json:"failed"`
	Results   []BulkResult `json:"results"`
}

type bulkItem struct {
	index   int
	sku     string
	name    string // "" keeps an existing product's name
	patch   map[string]any
	current *Product
	data    map[string]any
}

// Bulk upserts products by SKU (case-insensitive): sku and name are the product's, every other
// key is a data field. A new SKU is created (name required); a known one is updated with the
// fields given (null removes one) or left unchanged when nothing differs. An invalid product
// fails alone; the others are stored, in one transaction.
func (s *Service) Bulk(ctx context.Context, tenantID int64, products []map[string]any) (*BulkSummary, error) {
	return s.BulkWith(ctx, tenantID, products, nil)
}

// BulkWith is Bulk whose transaction also runs after (when not nil) once the products are
// written and the summary counted: whatever after writes commits or rolls back with them. The
// CSV import records its progress this way, so a retried chunk is neither lost nor counted twice.
func (s *Service) BulkWith(ctx context.Context, tenantID int64, products []map[string]any, after func(ctx context.Context, tx pgx.Tx, sum *BulkSummary) error) (*BulkSummary, error) {
	if len(products) > MaxBulk {
		return nil, errs.Coded(errs.ErrInvalid, "batch_too_large", "at most %d products per call, got %d", MaxBulk, len(products))
	}
	out := &BulkSummary{Results: make([]BulkResult, len(products))}
	queued := 0
	err := s.inTx(ctx, tenantID, func(tx pgx.Tx) error {
		sc, err := lockSchemaShared(ctx, tx, tenantID)
		if err != nil {
			return err
		}
		items := make([]*bulkItem, 0, len(products))
		seen := map[string]int{}
		for i, raw := range products {
			out.Results[i] = BulkResult{Index: i}
			it, fields := parseBulkItem(sc, i, raw)
			out.Results[i].SKU = it.sku
			if j, dup := seen[fold(it.sku)]; dup && it.sku != "" {
				fields = errs.Fields{"sku": fmt.Sprintf("repeats the sku of products[%d] in this call", j)}
			}
			if len(fields) > 0 {
				out.Results[i].Status, out.Results[i].Fields = BulkFailed, fields
				out.Results[i].Error = fields.Err().Error()
				continue
			}
			seen[fold(it.sku)] = i
			items = append(items, it)
		}
		if err := loadCurrent(ctx, tx, tenantID, items); err != nil {
			return err
		}
		// plan sorts items into creates and updates (or a final status); it runs again for the
		// creates another writer beat us to, which are updates after all.
		plan := func(items []*bulkItem) (creates, updates []*bulkItem) {
			for _, it := range items {
				r := &out.Results[it.index]
				f := errs.Fields{}
				if it.current == nil {
					checkName(f, "name", it.name)
					it.data = merge(nil, it.patch)
				} else {
					if it.name == "" {
						it.name = it.current.Name
					}
					it.data = merge(it.current.Data, it.patch)
				}
				checkRequired(sc, f, "", it.data)
				switch {
				case len(f) > 0:
					r.Status, r.Fields, r.Error = BulkFailed, f, f.Err().Error()
				case it.current == nil:
					creates = append(creates, it)
				case it.name == it.current.Name && sameValue(it.data, it.current.Data):
					r.Status, r.ID = BulkUnchanged, it.current.ID
				default:
					updates = append(updates, it)
				}
			}
			return creates, updates
		}
		creates, updates := plan(items)
		now := s.now().UTC()
		lost, err := insertItems(ctx, tx, tenantID, creates, now, out.Results)
		if err != nil {
			return err
		}
		if len(lost) > 0 {
			if err := loadCurrent(ctx, tx, tenantID, lost); err != nil {
				return err
			}
			for _, it := range lost {
				if it.current == nil {
					out.Results[it.index].Status = BulkFailed
					out.Results[it.index].Error = "another writer holds this sku; send it again"
				}
			}
			again, more := plan(slices.DeleteFunc(lost, func(it *bulkItem) bool { return it.current == nil }))
			if len(again) > 0 {
				return fmt.Errorf("bulk upsert: %d products neither inserted nor found", len(again))
			}
			updates = append(updates, more...)
		}
		if err := updateItems(ctx, tx, tenantID, updates, now, out.Results); err != nil {
			return err
		}
		if queued, err = queueBulkEmbeddings(ctx, tx, tenantID, sc, creates, updates, out.Results, now); err != nil {
			return err
		}
		out.count()
		if after != nil {
			return after(ctx, tx, out)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if queued > 0 {
		s.kickEmbeddings(ctx, tenantID)
	}
	return out, nil
}

func (out *BulkSummary) count() {
	out.Created, out.Updated, out.Unchanged, out.Failed = 0, 0, 0, 0
	for _, r := range out.Results {
		switch r.Status {
		case BulkCreated:
			out.Created++
		case BulkUpdated:
			out.Updated++
		case BulkUnchanged:
			out.Unchanged++
		case BulkFailed:
			out.Failed++
		}
	}
}

// parseBulkItem splits one bulk product into sku, name and checked data fields.
func parseBulkItem(sc *Schema, i int, raw map[string]any) (*bulkItem, errs.Fields) {
	f := errs.Fields{}
	it := &bulkItem{index: i}
	if raw == nil {
		f.Add("product", "must be an object")
		return it, f
	}
	sku, ok := raw["sku"].(string)
	if !ok && raw["sku"] != nil {
		f.Add("sku", "must be a string")
	}
	it.sku = strings.TrimSpace(sku)
	checkSKU(f, "sku", it.sku)
	if v, present := raw["name"]; present && v != nil {
		name, ok := v.(string)
		if !ok {
			f.Add("name", "must be a string")
		} else if it.name = strings.TrimSpace(name); it.name == "" {
			f.Add("name", "must not be empty")
		} else {
			checkName(f, "name", it.name)
		}
	}
	data := make(map[string]any, len(raw))
	for k, v := range raw {
		if k != "sku" && k != "name" {
			data[k] = v
		}
	}
	if nested, ok := data["data"].(map[string]any); ok && len(data) == 1 {
		data = nested // {"sku", "name", "data": {...}} is accepted too
	}
	it.patch = checkData(sc, f, "", data)
	return it, f
}

// loadCurrent finds the products the items' SKUs name.
func loadCurrent(ctx context.Context, tx pgx.Tx, tenantID int64, items []*bulkItem) error {
	if len(items) == 0 {
		return nil
	}
	keys := make([]string, len(items))
	for i, it := range items {
		keys[i] = fold(it.sku)
	}
	rows, err := tx.Query(ctx, `SELECT u.i, `+prefixed("p.", productColumns)+` FROM products p
		JOIN unnest($2::text[]) WITH ORDINALITY AS u(k, i) ON p.sku_key = u.k
		WHERE p.tenant_id = $1 FOR UPDATE OF p`, tenantID, keys)
	if err != nil {
		return fmt.Errorf("find products by sku: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var i int64
		var p Product
		var data []byte
		if err := rows.Scan(&i, &p.ID, &p.SKU, &p.Name, &data, &p.CreatedAt, &p.UpdatedAt); err != nil {
			return fmt.Errorf("find products by sku: %w", err)
		}
		p.Data = map[string]any{}
		_ = json.Unmarshal(data, &p.Data)
		items[i-1].current = &p
	}
	return rows.Err()
}

// insertItems creates the items' products and returns those whose SKU another writer created
// meanwhile (they become updates).
func insertItems(ctx context.Context, tx pgx.Tx, tenantID int64, items []*bulkItem, now time.Time, results []BulkResult) ([]*bulkItem, error) {
	if len(items) == 0 {
		return nil, nil
	}
	skus, names, datas := make([]string, len(items)), make([]string, len(items)), make([]string, len(items))
	for i, it := range items {
		enc, _ := json.Marshal(it.data)
		skus[i], names[i], datas[i] = it.sku, it.name, string(enc)
	}
	skuKeys, nameKeys := make([]string, len(items)), make([]string, len(items))
	for i, it := range items {
		skuKeys[i], nameKeys[i] = fold(it.sku), fold(it.name)
	}
	rows, err := tx.Query(ctx, `INSERT INTO products (tenant_id, sku, name, sku_key, name_key, data, created_at, updated_at)
		SELECT $1, s, n, sk, nk, d::jsonb, $2, $2
		FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::text[]) WITH ORDINALITY AS u(s, n, sk, nk, d, o)
		ORDER BY o
		ON CONFLICT (tenant_id, sku_key) DO NOTHING
		RETURNING id, sku`, tenantID, now, skus, names, skuKeys, nameKeys, datas)
	if err != nil {
		return nil, fmt.Errorf("create products: %w", err)
	}
	defer rows.Close()
	ids := make(map[string]int64, len(items))
	for rows.Next() {
		var id int64
		var sku string
		if err := rows.Scan(&id, &sku); err != nil {
			return nil, fmt.Errorf("create products: %w", err)
		}
		ids[sku] = id // inserted verbatim, so the item's own SKU
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("create products: %w", err)
	}
	var lost []*bulkItem
	for _, it := range items {
		id, ok := ids[it.sku]
		if !ok {
			lost = append(lost, it)
			continue
		}
		results[it.index].Status, results[it.index].ID = BulkCreated, id
	}
	return lost, nil
}

func updateItems(ctx context.Context, tx pgx.Tx, tenantID int64, items []*bulkItem, now time.Time, results []BulkResult) error {
	if len(items) == 0 {
		return nil
	}
	ids, names, datas := make([]int64, len(items)), make([]string, len(items)), make([]string, len(items))
	for i, it := range items {
		enc, _ := json.Marshal(it.data)
		ids[i], names[i], datas[i] = it.current.ID, it.name, string(enc)
	}
	nameKeys := make([]string, len(items))
	for i, it := range items {
		nameKeys[i] = fold(it.name)
	}
	if _, err := tx.Exec(ctx, `UPDATE products p SET name = u.n, name_key = u.nk, data = u.d::jsonb, updated_at = $2
		FROM unnest($3::bigint[], $4::text[], $5::text[], $6::text[]) AS u(id, n, nk, d) WHERE p.tenant_id = $1 AND p.id = u.id`,
		tenantID, now, ids, names, nameKeys, datas); err != nil {
		return fmt.Errorf("update products: %w", err)
	}
	for _, it := range items {
		results[it.index].Status, results[it.index].ID = BulkUpdated, it.current.ID
	}
	return nil
}

// prefixed qualifies every column of a comma-separated list.
func prefixed(prefix, columns string) string {
	parts := strings.Split(columns, ", ")
	for i, c := range parts {
		parts[i] = prefix + c
	}
	return strings.Join(parts, ", ")
}
