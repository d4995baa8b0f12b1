package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cohort-dev/cohort/internal/warehouse"
	whpg "github.com/cohort-dev/cohort/internal/warehouse/postgres"
)

// Sink applies a batch of accepted events exactly once: in one Postgres transaction it records the
// event ids (skipping those already stored), writes the new events to the warehouse (the embedded
// one in the same transaction; BigQuery before commit, deduplicated by insert id), merges profiles
// and updates the stats rollups.
type Sink struct {
	pool *pgxpool.Pool
	wh   warehouse.Writer
	// embedded: wh is the Postgres warehouse, written in the sink's own transaction.
	embedded bool
}

// NewSink applies batches through pool and wh. It needs no clock: buckets follow each event's
// received_at, and profiles' updated_at is the database's now().
func NewSink(pool *pgxpool.Pool, wh warehouse.Writer) *Sink {
	_, embedded := wh.(*whpg.Writer)
	return &Sink{pool: pool, wh: wh, embedded: embedded}
}

// Apply stores the batch; it returns how many events were new.
func (s *Sink) Apply(ctx context.Context, events []warehouse.Event) (int, error) {
	var n int
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var fresh []warehouse.Event
		var err error
		if s.embedded {
			fresh, err = whpg.InsertNew(ctx, tx, events)
		} else {
			fresh, err = whpg.Dedupe(ctx, tx, events)
			if err == nil && len(fresh) > 0 {
				if _, werr := s.wh.Write(ctx, fresh); werr != nil {
					err = fmt.Errorf("write %s: %w", s.wh.Name(), werr)
				}
			}
		}
		if err != nil {
			return err
		}
		n = len(fresh)
		if len(fresh) == 0 {
			return nil
		}
		if err := s.upsertProfiles(ctx, tx, fresh); err != nil {
			return err
		}
		if s.embedded {
			// Segment rollups; BigQuery computes segments from its raw events.
			if err := s.updateUserStats(ctx, tx, fresh); err != nil {
				return err
			}
		}
		return s.updateRollups(ctx, tx, fresh)
	})
	return n, err
}

type userKey struct {
	tenant int64
	user   string
}

type profileDelta struct {
	first, last time.Time
	traits      map[string]json.RawMessage
	times       map[string]time.Time // per trait: occurred_at of the identify that set it
}

func (s *Sink) upsertProfiles(ctx context.Context, tx pgx.Tx, events []warehouse.Event) error {
	deltas := map[userKey]*profileDelta{}
	for _, e := range events {
		k := userKey{e.TenantID, e.UserID}
		d := deltas[k]
		if d == nil {
			d = &profileDelta{first: e.OccurredAt, last: e.OccurredAt}
			deltas[k] = d
		}
		if e.OccurredAt.Before(d.first) {
			d.first = e.OccurredAt
		}
		if e.OccurredAt.After(d.last) {
			d.last = e.OccurredAt
		}
		if e.EventType == ContextIdentified {
			var traits map[string]json.RawMessage
			if err := json.Unmarshal(e.Payload, &traits); err == nil {
				if d.traits == nil {
					d.traits, d.times = map[string]json.RawMessage{}, map[string]time.Time{}
				}
				// Per trait, the identify that occurred last wins (on a tie, the later one in the
				// batch): what applying them in stable occurred_at order gives, without sorting the
				// whole batch on every flush.
				for k, v := range traits {
					if t, seen := d.times[k]; !seen || !e.OccurredAt.Before(t) {
						d.traits[k], d.times[k] = v, e.OccurredAt
					}
				}
			}
		}
	}
	keys := make([]userKey, 0, len(deltas))
	for k := range deltas {
		keys = append(keys, k)
	}
	// A fixed lock order keeps concurrent loaders from deadlocking.
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].tenant != keys[j].tenant {
			return keys[i].tenant < keys[j].tenant
		}
		return keys[i].user < keys[j].user
	})
	tenants := make([]int64, len(keys))
	users := make([]string, len(keys))
	traits := make([]string, len(keys))
	firsts := make([]time.Time, len(keys))
	lasts := make([]time.Time, len(keys))
	times := make([]string, len(keys))
	for i, k := range keys {
		d := deltas[k]
		tenants[i], users[i], firsts[i], lasts[i] = k.tenant, k.user, d.first, d.last
		traits[i], times[i] = "{}", "{}"
		if len(d.traits) > 0 {
			b, err := json.Marshal(d.traits)
			if err != nil {
				return fmt.Errorf("encode traits: %w", err)
			}
			traits[i] = string(b)
			if b, err = json.Marshal(d.times); err != nil {
				return fmt.Errorf("encode trait times: %w", err)
			}
			times[i] = string(b)
		}
	}
	_, err := tx.Exec(ctx, `
		INSERT INTO profiles (tenant_id, user_id, traits, trait_times, first_seen_at, last_seen_at, updated_at)
		SELECT t, u, tr::jsonb, tt::jsonb, f, l, now()
		FROM unnest($1::bigint[], $2::text[], $3::text[], $4::timestamptz[], $5::timestamptz[], $6::text[]) AS x(t, u, tr, f, l, tt)
		ON CONFLICT (tenant_id, user_id) DO UPDATE SET
			-- Per trait, the value set most recently (by occurred_at) wins.
			traits = profiles.traits || COALESCE((
				SELECT jsonb_object_agg(e.key, e.value) FROM jsonb_each(EXCLUDED.traits) AS e
				WHERE NOT profiles.trait_times ? e.key
				   OR (EXCLUDED.trait_times->>e.key)::timestamptz >= (profiles.trait_times->>e.key)::timestamptz), '{}'),
			trait_times = profiles.trait_times || COALESCE((
				SELECT jsonb_object_agg(e.key, e.value) FROM jsonb_each(EXCLUDED.trait_times) AS e
				WHERE NOT profiles.trait_times ? e.key
				   OR (e.value #>> '{}')::timestamptz >= (profiles.trait_times->>e.key)::timestamptz), '{}'),
			first_seen_at = LEAST(profiles.first_seen_at, EXCLUDED.first_seen_at),
			last_seen_at  = GREATEST(profiles.last_seen_at, EXCLUDED.last_seen_at),
			updated_at    = now()
		-- Rewriting a row costs a new tuple: skip when nothing would change, and keep
		-- last_seen_at to the minute.
		WHERE EXCLUDED.traits <> '{}'::jsonb
			OR EXCLUDED.first_seen_at < profiles.first_seen_at
			OR EXCLUDED.last_seen_at > profiles.last_seen_at + interval '1 minute'`, tenants, users, traits, firsts, lasts, times)
	if err != nil {
		return fmt.Errorf("upsert profiles: %w", err)
	}
	return nil
}

type bucketKey struct {
	tenant int64
	bucket time.Time
}

func (s *Sink) updateRollups(ctx context.Context, tx pgx.Tx, events []warehouse.Event) error {
	type countKey struct {
		bucketKey
		eventType string
	}
	counts := map[countKey]int64{}
	sketches := map[bucketKey]Sketch{}
	for _, e := range events {
		bk := bucketKey{e.TenantID, e.ReceivedAt.UTC().Truncate(time.Hour)}
		counts[countKey{bk, e.EventType}]++
		sk := sketches[bk]
		if sk == nil {
			sk = NewSketch()
			sketches[bk] = sk
		}
		sk.Add(e.UserID)
	}
	ckeys := make([]countKey, 0, len(counts))
	for k := range counts {
		ckeys = append(ckeys, k)
	}
	sort.Slice(ckeys, func(i, j int) bool {
		a, b := ckeys[i], ckeys[j]
		if a.tenant != b.tenant {
			return a.tenant < b.tenant
		}
		if !a.bucket.Equal(b.bucket) {
			return a.bucket.Before(b.bucket)
		}
		return a.eventType < b.eventType
	})
	ts := make([]int64, len(ckeys))
	bs := make([]time.Time, len(ckeys))
	es := make([]string, len(ckeys))
	ns := make([]int64, len(ckeys))
	for i, k := range ckeys {
		ts[i], bs[i], es[i], ns[i] = k.tenant, k.bucket, k.eventType, counts[k]
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO ingestion_hourly (tenant_id, bucket, event_type, event_count)
		SELECT * FROM unnest($1::bigint[], $2::timestamptz[], $3::text[], $4::bigint[])
		ON CONFLICT (tenant_id, bucket, event_type) DO UPDATE SET event_count = ingestion_hourly.event_count + EXCLUDED.event_count`,
		ts, bs, es, ns); err != nil {
		return fmt.Errorf("update hourly counts: %w", err)
	}

	bkeys := make([]bucketKey, 0, len(sketches))
	for k := range sketches {
		bkeys = append(bkeys, k)
	}
	sort.Slice(bkeys, func(i, j int) bool {
		if bkeys[i].tenant != bkeys[j].tenant {
			return bkeys[i].tenant < bkeys[j].tenant
		}
		return bkeys[i].bucket.Before(bkeys[j].bucket)
	})
	for _, k := range bkeys {
		// Create the row if missing, then lock it and merge: concurrent loaders serialise per bucket.
		if _, err := tx.Exec(ctx, `INSERT INTO ingestion_hourly_users (tenant_id, bucket, sketch) VALUES ($1, $2, $3)
			ON CONFLICT DO NOTHING`, k.tenant, k.bucket, []byte(NewSketch())); err != nil {
			return fmt.Errorf("create user sketch: %w", err)
		}
		var stored []byte
		if err := tx.QueryRow(ctx, `SELECT sketch FROM ingestion_hourly_users WHERE tenant_id = $1 AND bucket = $2 FOR UPDATE`,
			k.tenant, k.bucket).Scan(&stored); err != nil {
			return fmt.Errorf("lock user sketch: %w", err)
		}
		merged := sketches[k]
		if err := merged.Merge(stored); err != nil {
			return fmt.Errorf("merge user sketch: %w", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE ingestion_hourly_users SET sketch = $3 WHERE tenant_id = $1 AND bucket = $2`,
			k.tenant, k.bucket, []byte(merged)); err != nil {
			return fmt.Errorf("store user sketch: %w", err)
		}
	}
	return nil
}
