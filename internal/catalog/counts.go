package catalog

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// inTx runs fn in a transaction that ends by moving the tenant's catalogue version on (table
// catalog_versions), which makes every count cached for the tenant stale the moment the writes
// commit. The version row is locked only by that last statement, between it and the commit, so
// writers of one tenant never hold it while they wait for anything else (no deadlock) and queue
// on it only for their commits.
func (s *Service) inTx(ctx context.Context, tenantID int64, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO catalog_versions (tenant_id, version) VALUES ($1, 1)
			ON CONFLICT (tenant_id) DO UPDATE SET version = catalog_versions.version + 1`, tenantID); err != nil {
			return fmt.Errorf("catalogue version: %w", err)
		}
		return nil
	})
}

// versionSQL reads the tenant's catalogue version ($1 is the tenant); 0 before its first write.
const versionSQL = "COALESCE((SELECT version FROM catalog_versions WHERE tenant_id = $1), 0)"

// maxCachedCounts bounds the counts a process keeps (a few hundred kB).
const maxCachedCounts = 4096

// countCache holds, per tenant and list condition, the number of matching products at a
// catalogue version.
type countCache struct {
	mu      sync.Mutex
	entries map[string]cachedCount
}

type cachedCount struct {
	version, total int64
}

func countKey(cond string, args []any) string {
	var b strings.Builder
	b.WriteString(cond)
	for _, a := range args {
		fmt.Fprintf(&b, "\x00%v", a)
	}
	return b.String()
}

func (c *countCache) get(key string) (cachedCount, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.entries[key]
	return v, ok
}

func (c *countCache) put(key string, v cachedCount) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[string]cachedCount{}
	}
	old, ok := c.entries[key]
	if ok && old.version > v.version {
		return // a concurrent list counted at a newer version
	}
	if !ok && len(c.entries) >= maxCachedCounts {
		// Full: drop an arbitrary eighth (map order is random), so the cost stays amortised.
		n := maxCachedCounts / 8
		for k := range c.entries {
			delete(c.entries, k)
			if n--; n == 0 {
				break
			}
		}
	}
	c.entries[key] = v
}

// countProducts counts the products matching cond (whose $1 is the tenant) and reads the
// catalogue version, in one statement and so one snapshot.
func countProducts(ctx context.Context, pool *pgxpool.Pool, cond string, args []any) (cachedCount, error) {
	var c cachedCount
	err := readOnly(ctx, pool, stmt{sql: "SELECT " + versionSQL + ", count(*) FROM products WHERE " + cond, args: args,
		read: func(br pgx.BatchResults) error { return br.QueryRow().Scan(&c.version, &c.total) }})
	return c, err
}
