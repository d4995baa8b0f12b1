package load

import (
	"strconv"
	"sync"
	"time"

	"github.com/cohort-dev/cohort/internal/identity"
)

// maxSeenUsers bounds the loader's memory of stored profiles (about 100 bytes a user); when it is
// full it starts again empty.
const maxSeenUsers = 1 << 20

// seenSlack is how far the profile upsert lets last_seen_at lag: an event less than this after
// the stored last_seen_at changes nothing. The upsert's SQL and seenCache both use it.
const seenSlack = time.Minute

// seenSlackSQL is seenSlack as the upsert's interval literal.
var seenSlackSQL = strconv.FormatInt(seenSlack.Microseconds(), 10) + " microseconds"

// seenCache remembers, per user, a span of time that the stored profile is known to cover: its
// first_seen_at is at or before first, and its last_seen_at at or after last. Stored profiles
// only ever widen (the upsert takes the least first and the greatest last, and nothing deletes
// them), so what was true at a commit stays true, whichever loader writes next. A user whose
// batch brings no traits and whose events fall in the span would be left as it is by the upsert
// (its WHERE clauses say the same): the loader need not send it at all.
type seenCache struct {
	mu  sync.Mutex
	max int
	m   map[userKey]seenSpan
}

type seenSpan struct{ first, last int64 } // Unix microseconds, as Postgres keeps them

func newSeenCache(max int) *seenCache {
	return &seenCache{max: max, m: map[userKey]seenSpan{}}
}

// drop returns the rows that the stored profiles may not cover, in place.
func (c *seenCache) drop(rows []profileRow) []profileRow {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) == 0 {
		return rows
	}
	out := rows[:0]
	for _, r := range rows {
		if len(r.traits) == 0 {
			if sp, ok := c.m[r.userKey]; ok && sp.first <= r.first.UnixMicro() && sp.last+seenSlack.Microseconds() >= r.last.UnixMicro() {
				continue
			}
		}
		out = append(out, r)
	}
	return out
}

// add records the rows of a committed upsert. After it, a profile's first_seen_at is at or before
// the row's first, and its last_seen_at at most a minute before the row's last (the upsert leaves
// a later time within the minute alone).
func (c *seenCache) add(rows []profileRow) {
	if len(rows) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m)+len(rows) > c.max {
		clear(c.m)
	}
	for _, r := range rows {
		sp := seenSpan{r.first.UnixMicro(), r.last.UnixMicro() - seenSlack.Microseconds()}
		if old, ok := c.m[r.userKey]; ok {
			sp.first, sp.last = min(sp.first, old.first), max(sp.last, old.last)
		}
		c.m[r.userKey] = sp
	}
}

// forget drops the linked ids: their profiles were merged into their users' and deleted, so what
// was known of them no longer holds.
func (c *seenCache) forget(links []identity.Link) {
	if len(links) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range links {
		delete(c.m, userKey{l.TenantID, l.ID})
	}
}
