package load

import (
	"cmp"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/cohort-dev/cohort/internal/ident"
	"github.com/cohort-dev/cohort/internal/ingest/wire"
	"github.com/cohort-dev/cohort/internal/warehouse"
)

// Per-user rollups for segment conditions without a time window (the embedded warehouse only):
// warehouse.user_event_stats (events, first and latest occurred_at per user and event type) and
// warehouse.user_property_stats (count, sum, min and max of every top-level numeric payload
// property per user and event type). They change in the loader's transaction with the events
// themselves, from the events that were new, so they are exact under redelivery. A property is
// numeric exactly when the warehouse function warehouse.jnum reads it as a number (warehouse.JNum:
// a JSON number, or a string holding a decimal number such as "12.50"), and counted when its name
// is one the segment language can name (ident.MaxNameLen).

type statKey struct {
	tenant    int64
	eventType string
	user      string
}

// eventStat is a row of warehouse.user_event_stats for the batch.
type eventStat struct {
	statKey
	n           int64
	first, last time.Time
}

// propKey is a row of warehouse.user_property_stats.
type propKey struct {
	tenant    int64
	eventType string
	property  string
	user      string
}

// propStat is a row of warehouse.user_property_stats for the batch: its values' texts, comma-
// separated (a number's text never holds a comma), and how many there are.
type propStat struct {
	propKey
	n      int64
	values string
}

// propValue is one numeric property of an event.
type propValue struct{ name, num string }

func queueUserStats(p *pipeline, events []warehouse.Event) {
	// The rows in slices, found through maps by key; sorted in place below.
	stats := make([]eventStat, 0, len(events))
	statAt := make(map[statKey]int, len(events))
	var props []propStat
	propAt := map[propKey]int{}
	var own []propValue // the current event's
	for _, e := range events {
		k := statKey{e.TenantID, e.EventType, e.UserID}
		i, seen := statAt[k]
		if !seen {
			i = len(stats)
			statAt[k] = i
			stats = append(stats, eventStat{statKey: k, first: e.OccurredAt, last: e.OccurredAt})
		}
		st := &stats[i]
		st.n++
		if e.OccurredAt.Before(st.first) {
			st.first = e.OccurredAt
		}
		if e.OccurredAt.After(st.last) {
			st.last = e.OccurredAt
		}
		if !hasNumberish(e.Payload) {
			continue
		}
		own = own[:0]
		wire.NumericProperties(e.Payload, ident.MaxNameLen, func(name, txt string) {
			// A repeated key: the last value wins, as in jsonb ("" drops a number it replaced).
			for j := range own {
				if own[j].name == name {
					if txt != "" {
						own[j].num = txt
						return
					}
					own = append(own[:j], own[j+1:]...)
					return
				}
			}
			if txt != "" {
				own = append(own, propValue{name, txt})
			}
		})
		for _, v := range own {
			pk := propKey{e.TenantID, e.EventType, v.name, e.UserID}
			if i, seen := propAt[pk]; seen {
				props[i].n++
				props[i].values += "," + v.num
				continue
			}
			propAt[pk] = len(props)
			props = append(props, propStat{propKey: pk, n: 1, values: v.num})
		}
	}
	// One lock order for every loader: the primary key's, byte order as its "C" collation
	// compares (migration 0011), so the upserts also walk the index in order.
	slices.SortFunc(stats, func(a, b eventStat) int {
		if a.tenant != b.tenant {
			return cmp.Compare(a.tenant, b.tenant)
		}
		if c := strings.Compare(a.eventType, b.eventType); c != 0 {
			return c
		}
		return strings.Compare(a.user, b.user)
	})
	n := len(stats)
	ts, es, us := make([]int64, n), make([]string, n), make([]string, n)
	ns, fs, ls := make([]int64, n), make([]time.Time, n), make([]time.Time, n)
	for i := range stats {
		st := &stats[i]
		ts[i], es[i], us[i], ns[i], fs[i], ls[i] = st.tenant, st.eventType, st.user, st.n, st.first, st.last
	}
	p.exec("update user event stats", `
		INSERT INTO warehouse.user_event_stats AS s (tenant_id, event_type, user_id, events, first_at, last_at)
		SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bigint[], $5::timestamptz[], $6::timestamptz[])
		ON CONFLICT (tenant_id, event_type, user_id) DO UPDATE SET events = s.events + EXCLUDED.events,
			first_at = LEAST(s.first_at, EXCLUDED.first_at), last_at = GREATEST(s.last_at, EXCLUDED.last_at)`,
		ts, es, us, ns, fs, ls)
	if len(props) == 0 {
		return
	}
	slices.SortFunc(props, func(a, b propStat) int {
		if a.tenant != b.tenant {
			return cmp.Compare(a.tenant, b.tenant)
		}
		if c := strings.Compare(a.eventType, b.eventType); c != 0 {
			return c
		}
		if c := strings.Compare(a.property, b.property); c != 0 {
			return c
		}
		return strings.Compare(a.user, b.user)
	})
	n = len(props)
	pt, pe, pp, pu, on, ov := make([]int64, n), make([]string, n), make([]string, n), make([]string, n), make([]int64, n), make([]string, n)
	for i := range props {
		ps := &props[i]
		pt[i], pe[i], pp[i], pu[i], on[i], ov[i] = ps.tenant, ps.eventType, ps.property, ps.user, ps.n, ps.values
	}
	// Numbers are summed and compared by Postgres (numeric, exactly as warehouse.jnum reads them).
	// A row with one value in the batch, the usual case, needs no aggregate: its value is read
	// once (OFFSET 0 keeps the planner from copying the cast into each of the three uses), and
	// only rows with several values are aggregated, in one pass.
	p.exec("update user property stats", `
		INSERT INTO warehouse.user_property_stats AS s (tenant_id, event_type, property, user_id, n, total, min, max)
		SELECT t, et, p, u, n, coalesce(one, a.total), coalesce(one, a.min), coalesce(one, a.max)
		FROM (SELECT x.*, CASE WHEN n = 1 THEN v::numeric END AS one
			FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::text[]) AS x(t, et, p, u, n, v)
			OFFSET 0) x
		LEFT JOIN LATERAL (SELECT sum(y) AS total, min(y) AS min, max(y) AS max
			FROM unnest(string_to_array(x.v, ',')::numeric[]) AS y WHERE x.n > 1) a ON true
		ON CONFLICT (tenant_id, event_type, property, user_id) DO UPDATE SET n = s.n + EXCLUDED.n, total = s.total + EXCLUDED.total,
			min = LEAST(s.min, EXCLUDED.min), max = GREATEST(s.max, EXCLUDED.max)`,
		pt, pe, pp, pu, on, ov)
}

// hasNumberish is a cheap pre-check: a payload without any digit has no numeric property.
func hasNumberish(p json.RawMessage) bool {
	for _, c := range p {
		if c >= '0' && c <= '9' {
			return true
		}
	}
	return false
}
