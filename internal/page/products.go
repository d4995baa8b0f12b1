package page

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/cohort-dev/cohort/internal/block"
)

// Products returns the tenant's products of skus (compared ignoring case), in that order, each
// once, with their price and image as the public page shows them. Unknown SKUs are left out.
// Page exports read a page's products through it.
func (s *Service) Products(ctx context.Context, tenantID int64, skus []string) ([]PublicProduct, error) {
	var fields []byte
	var currency *string
	err := s.pool.QueryRow(ctx, `SELECT fields, default_currency FROM product_schemas WHERE tenant_id = $1`, tenantID).Scan(&fields, &currency)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("load product schema: %w", err)
	}
	out, err := s.publicProducts(ctx, tenantID, skus, fields, currency)
	if err != nil {
		return nil, fmt.Errorf("load products: %w", err)
	}
	return out, nil
}

// ShownSKUs are the SKUs a page shows products of: its product_skus (what a generation found),
// then the SKUs of its product_grid blocks in block order (what a PATCH, a build or a template
// put there), each once, compared ignoring case as the catalogue does. The public read lists
// them as product_skus with their products, and exports read the products of these SKUs, so
// what a storefront renders from one call matches the page's blocks.
func ShownSKUs(skus []string, blocks []block.Block) []string {
	out := []string{}
	seen := map[string]bool{}
	add := func(s string) {
		if k := strings.ToLower(s); s != "" && !seen[k] {
			seen[k] = true
			out = append(out, s)
		}
	}
	for _, s := range skus {
		add(s)
	}
	for _, b := range blocks {
		if b.Type != block.ProductGrid {
			continue
		}
		switch list := b.Props["product_skus"].(type) {
		case []any:
			for _, v := range list {
				if s, ok := v.(string); ok {
					add(s)
				}
			}
		case []string:
			for _, s := range list {
				add(s)
			}
		}
	}
	return out
}
