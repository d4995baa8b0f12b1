package load_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/warehouse"
)

// The per-user rollups the sink maintains batch by batch equal what warehouse.rebuild_user_stats
// computes from the stored events: whatever the batches (values repeated inside a batch, numeric
// strings of other scales, repeated payload keys) and however they are redelivered (the fast COPY
// path and the row-by-row path).
func TestSinkUserStatsMatchRebuild(t *testing.T) {
	pool := openPool(t)
	sink := newSink(pool)
	payloads := []string{
		`{"amount":12.5,"currency":"EUR"}`,
		`{"amount":"7.25","qty":3}`,
		`{"amount":" 1e2 ","qty":"x"}`,
		`{"amount":-0.125,"qty":2,"qty":"nope"}`, // the last of a repeated key wins
		`{"qty":"4","qty":5}`,
		`{"amount":1.50}`,
		`{}`,
		`{"note":"no numbers"}`,
		`{"amount":"12.50"}`,
	}
	var all []warehouse.Event
	for i := range 240 {
		all = append(all, whEvent(int64(1+i%2), fmt.Sprintf("e%03d", i), fmt.Sprintf("u%d", i%7),
			[]string{"order_completed", "page_viewed"}[i%3%2], at(time.Duration(i*37%500)*time.Minute),
			at(time.Duration(i)*time.Minute), payloads[i%len(payloads)]))
	}
	batches := [][]warehouse.Event{
		all[:100],                       // new: the fast path, with each user's rows repeated
		all[50:150],                     // half stored: the row-by-row path
		all[150:200],                    // new
		all[150:200],                    // redelivered whole
		append(all[200:], all[200:]...), // duplicates inside the batch
	}
	stored := 0
	for i, b := range batches {
		n, err := sink.Apply(context.Background(), b)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		stored += n
	}
	if stored != len(all) {
		t.Fatalf("stored %d events, want %d", stored, len(all))
	}
	checks := map[string]string{
		"user_event_stats": `
			WITH want AS (SELECT tenant_id, event_type, user_id, count(*) AS events, min(occurred_at) AS first_at, max(occurred_at) AS last_at
				FROM warehouse.events GROUP BY 1, 2, 3)
			SELECT format('%s %s %s: got %s %s %s, want %s %s %s', tenant_id, event_type, user_id, g.events, g.first_at, g.last_at, w.events, w.first_at, w.last_at)
			FROM want w FULL JOIN warehouse.user_event_stats g USING (tenant_id, event_type, user_id)
			WHERE (w.events, w.first_at, w.last_at) IS DISTINCT FROM (g.events, g.first_at, g.last_at)`,
		"user_property_stats": `
			WITH want AS (SELECT e.tenant_id, e.event_type, kv.key AS property, e.user_id, count(*) AS n, sum(warehouse.jnum(kv.value)) AS total,
					min(warehouse.jnum(kv.value)) AS min, max(warehouse.jnum(kv.value)) AS max
				FROM warehouse.events e, jsonb_each(e.payload) kv
				WHERE jsonb_typeof(e.payload) = 'object' AND length(kv.key) <= 128 AND warehouse.jnum(kv.value) IS NOT NULL
				GROUP BY 1, 2, 3, 4)
			SELECT format('%s %s %s %s: got %s %s %s %s, want %s %s %s %s', tenant_id, event_type, property, user_id, g.n, g.total, g.min, g.max, w.n, w.total, w.min, w.max)
			FROM want w FULL JOIN warehouse.user_property_stats g USING (tenant_id, event_type, property, user_id)
			WHERE (w.n, w.total, w.min, w.max) IS DISTINCT FROM (g.n, g.total, g.min, g.max)`,
	}
	for table, q := range checks {
		rows, err := pool.Query(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		var diffs []string
		for rows.Next() {
			var d string
			if err := rows.Scan(&d); err != nil {
				t.Fatal(err)
			}
			diffs = append(diffs, d)
		}
		rows.Close()
		if len(diffs) > 0 {
			t.Errorf("%s differs from a rebuild in %d rows:\n%s", table, len(diffs), strings.Join(diffs, "\n"))
		}
	}
	if n := queryInt(t, pool, `SELECT count(*) FROM warehouse.user_property_stats WHERE n > 1`); n == 0 {
		t.Error("no property row aggregates several values: the test lost its point")
	}
}
