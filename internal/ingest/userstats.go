package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cohort-dev/cohort/internal/warehouse"
)

// Per-user rollups for segment conditions without a time window (the embedded warehouse only):
// warehouse.user_event_stats (events, first and latest occurred_at per user and event type) and
// warehouse.user_property_stats (count, sum, min and max of every top-level numeric payload
// property per user and event type). They change in the loader's transaction with the events
// themselves, from the events that were new, so they are exact under redelivery. A property is
// numeric exactly when the warehouse function warehouse.jnum reads it as a number: a JSON number,
// or a string holding a decimal number such as "12.50".

// maxPropertyName matches the segment language's longest property name.
const maxPropertyName = 128

// numericString is warehouse.jnum's pattern for strings (Postgres \s is [ \t\n\r\f\v]).
var numericString = regexp.MustCompile(`^[\t\n\v\f\r ]*[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]{1,3})?[\t\n\v\f\r ]*$`)

// numericText returns the text Postgres casts to numeric when jnum would, and whether it would.
func numericText(v json.RawMessage) (string, bool) {
	if len(v) == 0 {
		return "", false
	}
	switch c := v[0]; {
	case c == '-' || (c >= '0' && c <= '9'):
		return string(v), true
	case c == '"':
		var s string
		if json.Unmarshal(v, &s) != nil || !numericString.MatchString(s) {
			return "", false
		}
		return s, true
	}
	return "", false
}

type statKey struct {
	tenant    int64
	eventType string
	user      string
}

type eventStat struct {
	n           int64
	first, last time.Time
}

func (s *Sink) updateUserStats(ctx context.Context, tx pgx.Tx, events []warehouse.Event) error {
	stats := make(map[statKey]*eventStat, len(events))
	var pt []int64
	var pe, pp, pu, pv []string
	for _, e := range events {
		k := statKey{e.TenantID, e.EventType, e.UserID}
		st := stats[k]
		if st == nil {
			st = &eventStat{first: e.OccurredAt, last: e.OccurredAt}
			stats[k] = st
		}
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
		first := len(pp)
		numericProperties(e.Payload, func(name, txt string) {
			// A repeated key: the last value wins, as in jsonb ("" drops a number it replaced).
			for j := first; j < len(pp); j++ {
				if pp[j] == name {
					if txt != "" {
						pv[j] = txt
						return
					}
					last := len(pp) - 1
					pt[j], pe[j], pp[j], pu[j], pv[j] = pt[last], pe[last], pp[last], pu[last], pv[last]
					pt, pe, pp, pu, pv = pt[:last], pe[:last], pp[:last], pu[:last], pv[:last]
					return
				}
			}
			if txt != "" {
				pt, pe, pp, pu, pv = append(pt, e.TenantID), append(pe, e.EventType), append(pp, name), append(pu, e.UserID), append(pv, txt)
			}
		})
	}
	keys := make([]statKey, 0, len(stats))
	for k := range stats {
		keys = append(keys, k)
	}
	// One lock order for every loader.
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.tenant != b.tenant {
			return a.tenant < b.tenant
		}
		if a.eventType != b.eventType {
			return a.eventType < b.eventType
		}
		return a.user < b.user
	})
	ts, es, us := make([]int64, len(keys)), make([]string, len(keys)), make([]string, len(keys))
	ns, fs, ls := make([]int64, len(keys)), make([]time.Time, len(keys)), make([]time.Time, len(keys))
	for i, k := range keys {
		st := stats[k]
		ts[i], es[i], us[i], ns[i], fs[i], ls[i] = k.tenant, k.eventType, k.user, st.n, st.first, st.last
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO warehouse.user_event_stats AS s (tenant_id, event_type, user_id, events, first_at, last_at)
		SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bigint[], $5::timestamptz[], $6::timestamptz[])
		ON CONFLICT (tenant_id, event_type, user_id) DO UPDATE SET events = s.events + EXCLUDED.events,
			first_at = LEAST(s.first_at, EXCLUDED.first_at), last_at = GREATEST(s.last_at, EXCLUDED.last_at)`,
		ts, es, us, ns, fs, ls); err != nil {
		return fmt.Errorf("update user event stats: %w", err)
	}
	if len(pt) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO warehouse.user_property_stats AS s (tenant_id, event_type, property, user_id, n, total, min, max)
		SELECT t, et, p, u, count(*), sum(v::numeric), min(v::numeric), max(v::numeric)
		FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[]) AS x(t, et, p, u, v)
		GROUP BY t, et, p, u ORDER BY t, et, p, u
		ON CONFLICT (tenant_id, event_type, property, user_id) DO UPDATE SET n = s.n + EXCLUDED.n, total = s.total + EXCLUDED.total,
			min = LEAST(s.min, EXCLUDED.min), max = GREATEST(s.max, EXCLUDED.max)`,
		pt, pe, pp, pu, pv); err != nil {
		return fmt.Errorf("update user property stats: %w", err)
	}
	return nil
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
