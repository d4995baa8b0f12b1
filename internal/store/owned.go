package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// Execer runs a statement: a pool, a connection or a transaction.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// DeleteOwned deletes row id of table (a constant table name, never input) if it belongs to
// tenantID, and returns notFound when no such row of that tenant exists: another tenant's row is
// not found, as the API answers it.
func DeleteOwned(ctx context.Context, db Execer, table string, tenantID, id int64, notFound error) error {
	tag, err := db.Exec(ctx, "DELETE FROM "+table+" WHERE tenant_id = $1 AND id = $2", tenantID, id)
	if err != nil {
		return fmt.Errorf("delete %d from %s: %w", id, table, err)
	}
	if tag.RowsAffected() == 0 {
		return notFound
	}
	return nil
}
