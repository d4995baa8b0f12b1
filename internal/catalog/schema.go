package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cohort-dev/cohort/internal/errs"

	"github.com/cohort-dev/cohort/internal/store"
)

// Schema is a tenant's product schema (GET/PUT /api/pim/schema/).
type Schema struct {
	Fields          []Field `json:"fields"`
	DefaultCurrency string  `json:"default_currency"`
	DefaultLocale   string  `json:"default_locale"`
}

// Schema limits and defaults.
const (
	MaxFields       = 200
	DefaultCurrency = "USD"
	DefaultLocale   = "en"
	// maxOffending is how many SKUs a refused type change lists.
	maxOffending = 20
)

var (
	fieldName  = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)
	currencyRe = regexp.MustCompile(`^[A-Z]{3}$`)
	localeRe   = regexp.MustCompile(`^[a-z]{2,3}(-[A-Z]{2}|-[0-9]{3})?$`)
)

// BuiltIn are the product fields every schema has outside its fields list.
var BuiltIn = []string{"sku", "name"}

// Service owns the catalogue of every tenant.
type Service struct {
	pool   *pgxpool.Pool
	now    func() time.Time
	kicks  embeddingKicks // see WithEmbeddingScheduler
	counts countCache     // product list counts, see List
	// leaseRenewEvery is how often a drain renews the lease of its queue rows
	// (EmbeddingLeaseRenewEvery unless WithEmbeddingLeaseRenewal).
	leaseRenewEvery time.Duration
}

// Option sets a dependency of the service at construction.
type Option func(*Service)

// NewService builds the service. Without WithEmbeddingScheduler, saves queue embeddings but
// kick nothing (the worker's sweep finds the queued tenants).
func NewService(pool *pgxpool.Pool, now func() time.Time, opts ...Option) *Service {
	s := &Service{pool: pool, now: now, leaseRenewEvery: EmbeddingLeaseRenewEvery}
	s.kicks.last = map[int64]time.Time{}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Schema returns the tenant's schema; a tenant that never set one has no fields.
func (s *Service) Schema(ctx context.Context, tenantID int64) (*Schema, error) {
	return loadSchema(ctx, s.pool, tenantID)
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func loadSchema(ctx context.Context, q querier, tenantID int64) (*Schema, error) {
	out := &Schema{Fields: []Field{}, DefaultCurrency: DefaultCurrency, DefaultLocale: DefaultLocale}
	var fields []byte
	err := q.QueryRow(ctx, "SELECT fields, default_currency, default_locale FROM product_schemas WHERE tenant_id = $1", tenantID).
		Scan(&fields, &out.DefaultCurrency, &out.DefaultLocale)
	if errors.Is(err, pgx.ErrNoRows) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load product schema: %w", err)
	}
	if err := json.Unmarshal(fields, &out.Fields); err != nil {
		return nil, fmt.Errorf("read product schema: %w", err)
	}
	return out, nil
}

// field returns the schema's field of that name.
func (sc *Schema) field(name string) (Field, bool) {
	for _, f := range sc.Fields {
		if f.Name == name {
			return f, true
		}
	}
	return Field{}, false
}

// Validate checks a schema and fills labels; errors are keyed fields[i].<attr>.
func (sc *Schema) Validate() error {
	f := errs.Fields{}
	if sc.Fields == nil {
		sc.Fields = []Field{}
	}
	if len(sc.Fields) > MaxFields {
		f.Add("fields", "must have at most %d fields", MaxFields)
	}
	seen := map[string]int{}
	for i := range sc.Fields {
		fd := &sc.Fields[i]
		key := fmt.Sprintf("fields[%d]", i)
		fd.Name = strings.TrimSpace(fd.Name)
		switch {
		case !fieldName.MatchString(fd.Name):
			f.Add(key+".name", "must be snake_case: a lowercase letter, then lowercase letters, digits or _ (at most 63)")
		case slices.Contains(BuiltIn, fd.Name):
			f.Add(key+".name", "%s is built in: every product has sku and name", fd.Name)
		default:
			if j, dup := seen[fd.Name]; dup {
				f.Add(key+".name", "repeats fields[%d].name %q", j, fd.Name)
			}
			seen[fd.Name] = i
		}
		if !slices.Contains(Types, fd.Type) {
			f.Add(key+".type", "must be one of %s", strings.Join(Types, ", "))
		}
		if fd.Facet && fd.Type != TypeString && fd.Type != TypeArray {
			f.Add(key+".facet", "applies to string and array fields")
		}
		fd.Label = strings.TrimSpace(fd.Label)
		if fd.Label == "" {
			fd.Label = fd.Name
		}
		if len(fd.Label) > 200 || !validText(fd.Label) {
			f.Add(key+".label", "must be text of at most 200 bytes")
		}
		if len(fd.Unit) > 20 || !validText(fd.Unit) {
			f.Add(key+".unit", "must be text of at most 20 bytes")
		}
	}
	if sc.DefaultCurrency == "" {
		sc.DefaultCurrency = DefaultCurrency
	}
	if !currencyRe.MatchString(sc.DefaultCurrency) {
		f.Add("default_currency", "must be an ISO 4217 code such as EUR")
	}
	if sc.DefaultLocale == "" {
		sc.DefaultLocale = DefaultLocale
	}
	if !localeRe.MatchString(sc.DefaultLocale) {
		f.Add("default_locale", "must be a locale such as en or de-DE")
	}
	return f.Err()
}

// PutSchema replaces the tenant's schema. Every field that is new or changes type is checked
// against the values products already hold under that name: values that convert without loss
// are converted in the same transaction; otherwise the change is refused (400
// type_change_conflict) with the offending SKUs. Values of fields removed from the schema stay in the products' data (hidden
// from filters and facets) and come back if the field does.
func (s *Service) PutSchema(ctx context.Context, tenantID int64, in Schema) (*Schema, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	return s.EditSchema(ctx, tenantID, func(context.Context, pgx.Tx, Schema) (Schema, error) { return in, nil })
}

// SchemaEdit returns the schema to store given the tenant's current one. It runs inside the
// transaction that stores the result, under the tenant's schema lock, so what it reads is what
// the change replaces; what it writes through tx commits with the schema or not at all. An error
// leaves the schema as it was.
type SchemaEdit func(ctx context.Context, tx pgx.Tx, current Schema) (Schema, error)

// EditSchema replaces the tenant's schema with what edit makes of the current one, as
// PutSchema does (the result is validated, then fields that are new or change type are checked
// and converted).
func (s *Service) EditSchema(ctx context.Context, tenantID int64, edit SchemaEdit) (*Schema, error) {
	var (
		in       Schema
		requeued int64
	)
	err := s.inTx(ctx, tenantID, func(tx pgx.Tx) error {
		// One writer of a tenant's schema at a time; product writes read it under the same lock.
		key, err := store.LockKey(store.LockCatalogSchema, tenantID)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", key); err != nil {
			return fmt.Errorf("lock product schema: %w", err)
		}
		old, err := loadSchema(ctx, tx, tenantID)
		if err != nil {
			return err
		}
		current := *old
		current.Fields = slices.Clone(old.Fields) // edit may change its copy: old is compared below
		if in, err = edit(ctx, tx, current); err != nil {
			return err
		}
		if err := in.Validate(); err != nil {
			return err
		}
		for i, fd := range in.Fields {
			if prev, ok := old.field(fd.Name); ok && prev.Type == fd.Type {
				continue
			}
			if err := convertField(ctx, tx, tenantID, i, fd); err != nil {
				return err
			}
		}
		fields, _ := json.Marshal(in.Fields)
		_, err = tx.Exec(ctx, `INSERT INTO product_schemas (tenant_id, fields, default_currency, default_locale, updated_at)
			VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (tenant_id) DO UPDATE SET fields = EXCLUDED.fields, default_currency = EXCLUDED.default_currency,
				default_locale = EXCLUDED.default_locale, updated_at = EXCLUDED.updated_at`,
			tenantID, fields, in.DefaultCurrency, in.DefaultLocale, s.now().UTC())
		if err != nil {
			return fmt.Errorf("store product schema: %w", err)
		}
		if embeddingSpecChanged(old, &in) {
			requeued, err = queueAllEmbeddings(ctx, tx, tenantID, s.now().UTC())
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if requeued > 0 {
		s.kickEmbeddings(ctx, tenantID)
	}
	return &in, nil
}

// convertField converts the values products hold under fd.Name to fd.Type, or refuses.
func convertField(ctx context.Context, tx pgx.Tx, tenantID int64, index int, fd Field) error {
	rows, err := tx.Query(ctx, `SELECT id, sku, data -> $2 FROM products WHERE tenant_id = $1 AND data ? $2 ORDER BY id`, tenantID, fd.Name)
	if err != nil {
		return fmt.Errorf("read %s values: %w", fd.Name, err)
	}
	var ids []int64
	var values []string
	var offending []string
	bad := 0
	for rows.Next() {
		var id int64
		var sku string
		var raw []byte
		if err := rows.Scan(&id, &sku, &raw); err != nil {
			rows.Close()
			return fmt.Errorf("read %s values: %w", fd.Name, err)
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil || v == nil {
			continue
		}
		out, ok := convert(fd.Type, v)
		if !ok {
			bad++
			if len(offending) < maxOffending {
				offending = append(offending, sku)
			}
			continue
		}
		if !sameValue(out, v) {
			enc, _ := json.Marshal(out)
			ids, values = append(ids, id), append(values, string(enc))
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read %s values: %w", fd.Name, err)
	}
	if bad > 0 {
		more := ""
		if bad > len(offending) {
			more = fmt.Sprintf(" and %d more", bad-len(offending))
		}
		return &errs.ValidationError{Code: "type_change_conflict",
			Msg: fmt.Sprintf("%d product(s) hold %s values that are not %s", bad, fd.Name, fd.Type),
			Fields: map[string]string{fmt.Sprintf("fields[%d].type", index): fmt.Sprintf(
				"%d product(s) hold values that cannot become %s: %s%s", bad, fd.Type, strings.Join(offending, ", "), more)}}
	}
	if len(ids) > 0 {
		if _, err := tx.Exec(ctx, `UPDATE products p SET data = jsonb_set(p.data, ARRAY[$2::text], u.v::jsonb)
			FROM unnest($3::bigint[], $4::text[]) AS u(id, v) WHERE p.tenant_id = $1 AND p.id = u.id`,
			tenantID, fd.Name, ids, values); err != nil {
			return fmt.Errorf("convert %s values: %w", fd.Name, err)
		}
	}
	return nil
}
