package store_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cohort-dev/cohort/internal/testenv"
)

// TestIDColumnsCollateC: every stored user id, event id, event type and property name compares
// byte by byte (migration 0011), whatever the database's default collation. A new table whose
// user_id kept the default would make its joins with the others run in "C" where its own index
// cannot serve them, so this names any such column.
func TestIDColumnsCollateC(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testenv.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	rows, err := conn.Query(ctx, `SELECT table_schema || '.' || table_name || '.' || column_name, coalesce(collation_name, '')
		FROM information_schema.columns
		WHERE table_schema IN ('public', 'warehouse') AND data_type = 'text'
		  AND column_name IN ('user_id', 'anonymous_id', 'event_id', 'event_type', 'property')
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	type column struct{ name, collation string }
	cols, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (column, error) {
		var c column
		return c, r.Scan(&c.name, &c.collation)
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(cols) < 14 {
		t.Fatalf("found %d id columns, want the 14 of migration 0011 at least: %v", len(cols), cols)
	}
	for _, c := range cols {
		if c.collation != "C" {
			t.Errorf("%s: collation %q, want \"C\"", c.name, c.collation)
		}
	}
}
