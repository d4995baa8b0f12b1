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
// PollEvery; while the listener is disconnected the cache is bypassed entirely. Answers are kept
// by canonical user (a linked id answers for its user); a new link of the identity graph drops the
// linked id's cached answer through the same channel (announced by the identity_links trigger, migration 0025).
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
	// users holds answers by canonical user id; aliases the canonical user of each linked id
	// looked up (a link never changes once made, so an alias only goes with the tenant's entries).
	users   map[string][]int64
	aliases map[string]string
}

func newTenantEntries(version int64, gen uint64) *tenantEntries {
	return &tenantEntries{version: version, gen: gen, users: map[string][]int64{}, aliases: map[string]string{}}
}

// put records an answer, resetting the tenant's entries first when they are full.
func (te *tenantEntries) put(asked string, m Membership, max int) {
	if len(te.users)+len(te.aliases) >= max {
		te.users, te.aliases = map[string][]int64{}, map[string]string{}
	}
	te.users[m.UserID] = m.SegmentIDs
	if asked != m.UserID {
		te.aliases[asked] = m.UserID
	}
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

// Lookup returns the segments of the canonical user of id (a user id, or an anonymous id linked
// to one) and whether they came from memory. Answers are kept by canonical user, so a user's id
// and their linked ids share one entry; a new link drops the cached answer of the id it links
// (announced by the identity_links trigger, migration 0025), with the same delivery as a compute's version bump.
func (c *MembershipCache) Lookup(ctx context.Context, tenantID int64, id string) (Membership, bool, error) {
	c.mu.RLock()
	live := c.live
	te := c.tenants[tenantID]
	gen := c.gen // for a tenant without entries: any reset since makes the answer suspect
	if te != nil {
		user := id
		if u, ok := te.aliases[id]; ok {
			user = u
		}
		if ids, ok := te.users[user]; ok {
			c.mu.RUnlock()
			return Membership{UserID: user, SegmentIDs: ids}, true, nil
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
	m, err := c.svc.Membership(ctx, tenantID, id)
	if err != nil || !live {
		return m, false, err
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
		te = newTenantEntries(version, c.gen)
		te.put(id, m, c.maxPerTenant)
		c.tenants[tenantID] = te
	case te != nil && te.gen == gen:
		// Only when no invalidation (a version or a link) happened while we read the database.
		te.put(id, m, c.maxPerTenant)
	}
	return m, false, nil
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
	c.tenants[tenantID] = newTenantEntries(version, c.gen)
}

// linked drops the answer cached for an id that was just linked to a user (it was its own
// subject until then), and keeps lookups in flight from storing what they read before the link.
func (c *MembershipCache) linked(tenantID int64, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if te := c.tenants[tenantID]; te != nil {
		te.gen = c.gen
		delete(te.users, id)
		delete(te.aliases, id)
	}
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
			if tenant, id, ok := parseLinkNotice(payload); ok {
				c.linked(tenant, id)
			} else if tenant, version, ok := parseNotice(payload); ok {
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

// parseLinkNotice reads the identity_links trigger's payload (migration 0025), "<tenant>:link:<id>".
func parseLinkNotice(p string) (int64, string, bool) {
	t, id, ok := strings.Cut(p, ":link:")
	if !ok {
		return 0, "", false
	}
	tenant, err := strconv.ParseInt(t, 10, 64)
	return tenant, id, err == nil
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
