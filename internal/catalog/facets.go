package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
)

// Facet limits (api/openapi.yaml, listFacets).
const (
	FacetProducts = 1000 // facets count the tenant's first 1,000 products by id
	FacetValues   = 100  // values per field, most frequent first
)

// FacetValue is one value of a field and how many products hold it.
type FacetValue struct {
	Value string `json:"value"`
	Count int    `json:"count"`
}

// Facets are the distinct values of the schema's facet fields (every string and array field
// when none is marked) over the tenant's first 1,000 products by id: at most 100 values per
// field, by count then value.
func (s *Service) Facets(ctx context.Context, tenantID int64) (map[string][]FacetValue, error) {
	sc, err := s.Schema(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	var fields []string
	for _, f := range sc.Fields {
		if f.Facet {
			fields = append(fields, f.Name)
		}
	}
	if len(fields) == 0 {
		for _, f := range sc.Fields {
			if f.Type == TypeString || f.Type == TypeArray {
				fields = append(fields, f.Name)
			}
		}
	}
	out := make(map[string][]FacetValue, len(fields))
	if len(fields) == 0 {
		return out, nil
	}
	counts := make(map[string]map[string]int, len(fields))
	for _, f := range fields {
		counts[f] = map[string]int{}
	}
	// Only the facet fields' values leave Postgres.
	rows, err := s.pool.Query(ctx, `SELECT (SELECT jsonb_object_agg(k, data -> k) FROM unnest($2::text[]) k WHERE data ? k)
		FROM products WHERE tenant_id = $1 ORDER BY id LIMIT $3`, tenantID, fields, FacetProducts)
	if err != nil {
		return nil, fmt.Errorf("read facet values: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			return nil, fmt.Errorf("read facet values: %w", err)
		}
		if raw == nil {
			continue
		}
		var vals map[string]any
		if json.Unmarshal(raw, &vals) != nil {
			continue
		}
		for f, v := range vals {
			c := counts[f]
			switch x := v.(type) {
			case string:
				c[x]++
			case []any:
				seen := map[string]bool{}
				for _, e := range x {
					if s, ok := e.(string); ok && !seen[s] {
						seen[s] = true
						c[s]++
					}
				}
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read facet values: %w", err)
	}
	for _, f := range fields {
		vals := make([]FacetValue, 0, len(counts[f]))
		for v, n := range counts[f] {
			vals = append(vals, FacetValue{Value: v, Count: n})
		}
		sort.Slice(vals, func(i, j int) bool {
			if vals[i].Count != vals[j].Count {
				return vals[i].Count > vals[j].Count
			}
			return vals[i].Value < vals[j].Value
		})
		if len(vals) > FacetValues {
			vals = vals[:FacetValues]
		}
		out[f] = vals
	}
	return out, nil
}
