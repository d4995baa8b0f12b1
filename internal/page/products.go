package page

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
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
