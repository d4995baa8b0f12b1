package segment

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cohort-dev/cohort/internal/store"
)

// MembershipCache serves GET /api/segments/membership/ from memory. Every finished compute (and
// every segment deletion) bumps the tenant's version in segment_cache_versions and NOTIFYs
// NotifyChannel in the same transaction; every API replica LISTENs and drops the tenant's entries,
// so a replica never serves membership older than the last committed compute once the
// notification arrives (milliseconds). As a safety net the versions are also polled every
// PollEvery; while the listener is disconnected the cache is bypassed entirely.
type MembershipCache struct {
	svc          *Service
	pool         *pgxpool.Pool
	log          *slog.Logger
	maxPerTenant int
	pollEvery    time.Duration

	mu      sync.RWMutex
	live    bool   // listening: entries may be served
	gen     uint64 // bumped by every reset of a tenant's entries (and of all of them)
	tenants map[int64]*tenantEntries
}

type tenantEntries struct {
	version int64
	gen     uint64
	users   map[string][]int64
}

// CacheOptions tune the cache.
type CacheOptions struct {
	MaxUsersPerTenant int           // entries kept per tenant before the tenant's map is reset (default 500,000)
	PollEvery         time.Duration // version poll (default 5 s)
}

// NewMembershipCache builds the cache; Run must be running for it to serve from memory.
func NewMembershipCache(svc *Service, pool *pgxpool.Pool, log *slog.Logger, o CacheOptions) *MembershipCache {
	if o.MaxUsersPerTenant <= 0 {
		o.MaxUsersPerTenant = 500_000
	}
	if o.PollEvery <= 0 {
		o.PollEvery = 5 * time.Second
	}
	return &MembershipCache{svc: svc, pool: pool, log: log, maxPerTenant: o.MaxUsersPerTenant, pollEvery: o.PollEvery, tenants: map[int64]*tenantEntries{}}
}

// Lookup returns the user's segment ids and whether they came from memory.
func (c *MembershipCache) Lookup(ctx context.Context, tenantID int64, userID string) ([]int64, bool, error) {
	c.mu.RLock()
	live := c.live
	te := c.tenants[tenantID]
	gen := c.gen // for a tenant without entries: any reset since makes the answer suspect
	if te != nil {
		if ids, ok := te.users[userID]; ok {
			c.mu.RUnlock()
			return ids, true, nil
		}
		gen = te.gen
	}
	c.mu.RUnlock()
	// The first entry of a tenant is kept under the tenant's version read before its membership,
	// so the notification of that version (which may arrive after the read) does not drop it; any
	// later version does. Without a version (no row yet, or the read failed) it is kept under -1
	// until the next poll or notification.
	version := int64(-1)
	if te == nil && live {
		if err := c.pool.QueryRow(ctx, `SELECT version FROM segment_cache_versions WHERE tenant_id = $1`, tenantID).Scan(&version); err != nil {
			version = -1
		}
	}
	ids, err := c.svc.Membership(ctx, tenantID, userID)
	if err != nil || !live {
		return ids, false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	te = c.tenants[tenantID]
	switch {
	case !c.live:
	case te == nil && c.gen == gen:
		// Only when nothing was reset while we read the database (a listener reconnecting, say,
		// which may have missed this tenant's notification).
		c.gen++
		c.tenants[tenantID] = &tenantEntries{version: version, gen: c.gen, users: map[string][]int64{userID: ids}}
	case te != nil && te.gen == gen:
		// Only when no invalidation happened while we read the database.
		if len(te.users) >= c.maxPerTenant {
			te.users = make(map[string][]int64)
		}
		te.users[userID] = ids
	}
	return ids, false, nil
}

// invalidate drops a tenant's entries when its version moved past what they were read at.
func (c *MembershipCache) invalidate(tenantID, version int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	te := c.tenants[tenantID]
	if te != nil && te.version == version {
		return
	}
	c.gen++
	c.tenants[tenantID] = &tenantEntries{version: version, gen: c.gen, users: map[string][]int64{}}
}

// setLive turns serving from memory on or off. Going off drops every entry: notifications may be
// missed from then on. Going on keeps what the poll before it recorded (versions only: nothing is
// stored while off).
func (c *MembershipCache) setLive(live bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.live = live
	if !live {
		c.gen++
		c.tenants = map[int64]*tenantEntries{}
	}
}

// Run listens for membership changes until ctx ends, reconnecting after failures with backoff;
// each failure is logged, and lookups are served from the database until the listener is back.
// It returns nil when ctx ends.
func (c *MembershipCache) Run(ctx context.Context) error {
	l := &store.Listener{
		Pool: c.pool, Channel: NotifyChannel, Every: c.pollEvery, Log: c.log,
		Down:  "membership cache listener stopped; serving from the database until it reconnects",
		Ready: c.poll,
		Notify: func(payload string) {
			if tenant, version, ok := parseNotice(payload); ok {
				c.invalidate(tenant, version)
			}
		},
		Tick: c.poll,
		Live: c.setLive,
	}
	return l.Run(ctx)
}

func parseNotice(p string) (int64, int64, bool) {
	t, v, ok := strings.Cut(p, ":")
	if !ok {
		return 0, 0, false
	}
	tenant, err1 := strconv.ParseInt(t, 10, 64)
	version, err2 := strconv.ParseInt(v, 10, 64)
	return tenant, version, err1 == nil && err2 == nil
}

// poll reads every tenant's version and drops entries whose version moved.
func (c *MembershipCache) poll(ctx context.Context) error {
	rows, err := c.pool.Query(ctx, `SELECT tenant_id, version FROM segment_cache_versions`)
	if err != nil {
		return fmt.Errorf("poll membership versions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var t, v int64
		if err := rows.Scan(&t, &v); err != nil {
			return err
		}
		c.invalidate(t, v)
	}
	return rows.Err()
}
