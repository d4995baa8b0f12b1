package load

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cohort-dev/cohort/internal/identity"
	"github.com/cohort-dev/cohort/internal/ingest"
	"github.com/cohort-dev/cohort/internal/warehouse"
	whpg "github.com/cohort-dev/cohort/internal/warehouse/postgres"
)

// Sink applies a batch of accepted events exactly once: in one Postgres transaction it records the
// event ids (skipping those already stored), writes the new events to the warehouse (the embedded
// one in the same transaction; BigQuery before commit, deduplicated by insert id), merges profiles
// and updates the stats rollups.
//
// A batch is first written on the fast path: its events (or, with BigQuery, their ids) are copied
// in with COPY, which fails as a whole on a unique violation when any of them is stored already,
// and every rollup statement goes to Postgres in one pipelined round trip. Only a batch that
// conflicts (a redelivery, or a race with another loader) is rolled back and written again on the
// row-by-row path, which skips the stored events.
type Sink struct {
	pool   *pgxpool.Pool
	store  EventStore
	graph  *identity.Graph
	errlog *ingest.ErrorLog // identity refusals; nil: not logged
	// seen is what the stored profiles are known to cover, so the loader skips the users whose
	// profile would not change.
	seen *seenCache
}

// EventStore is where the sink stores a batch's events, within its transaction: the embedded
// warehouse itself (*whpg.Writer), or another warehouse behind the ledger of event ids
// (whpg.Ledger).
type EventStore interface {
	// StoreNew stores, within tx, the events whose (tenant_id, event_id) is not stored yet (the
	// first of any duplicates in events) and returns them. With fast it may instead fail as a
	// whole when any of them is stored already, with an error whpg.Retryable reports: the sink
	// then rolls its transaction back and calls it again without fast.
	StoreNew(ctx context.Context, tx pgx.Tx, events []warehouse.Event, fast bool) ([]warehouse.Event, error)
	// SegmentRollups reports whether the warehouse's segment queries read the per-user rollups
	// (warehouse.user_event_stats and warehouse.user_property_stats), which the sink then keeps
	// in the same transaction. BigQuery computes segments from its raw events.
	SegmentRollups() bool
}

// NewSink applies batches through pool, storing the events in store. It needs no clock: buckets
// follow each event's received_at, and profiles' updated_at is the database's now().
func NewSink(pool *pgxpool.Pool, store EventStore, opts ...SinkOption) *Sink {
	s := &Sink{pool: pool, store: store, seen: newSeenCache(maxSeenUsers)}
	for _, o := range opts {
		o(s)
	}
	if s.graph == nil {
		s.graph = identity.New(identity.Config{})
	}
	return s
}

// SinkOption configures a Sink.
type SinkOption func(*Sink)

// WithIdentity links ids by g's rules (default: identity.New with its default limit) and logs
// the claims it refuses to errlog (nil: not logged).
func WithIdentity(g *identity.Graph, errlog *ingest.ErrorLog) SinkOption {
	return func(s *Sink) { s.graph, s.errlog = g, errlog }
}

// Apply stores the batch; it returns how many events were new.
func (s *Sink) Apply(ctx context.Context, events []warehouse.Event) (int, error) {
	n, err := s.apply(ctx, events, true)
	if whpg.Retryable(err) {
		n, err = s.apply(ctx, events, false)
	}
	return n, err
}

// apply runs one attempt; fast copies the events (or ids) in, which fails on any stored one.
func (s *Sink) apply(ctx context.Context, events []warehouse.Event, fast bool) (int, error) {
	var n int
	var profiles []profileRow // queued, remembered once committed
	var links []identity.Link
	var refused []identity.Refusal
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		fresh, err := s.store.StoreNew(ctx, tx, events, fast)
		if err != nil {
			return err
		}
		n = len(fresh)
		if len(fresh) == 0 {
			return nil
		}
		// Links first, so this batch's own events of a newly linked id count for its user.
		if links, refused, err = s.graph.Apply(ctx, tx, claims(fresh), func(l identity.Link) error {
			return s.merge(ctx, tx, l)
		}); err != nil {
			return err
		}
		if lw, ok := s.store.(whpg.LinkWriter); ok && len(links) > 0 {
			if err := lw.WriteLinks(ctx, links); err != nil {
				return err
			}
		}
		resolved, err := resolve(ctx, tx, fresh)
		if err != nil {
			return err
		}
		profiles, err = s.rollups(ctx, tx, resolved)
		return err
	})
	if err == nil {
		s.seen.add(profiles)
		s.seen.forget(links)
		for _, r := range refused {
			if s.errlog != nil {
				s.errlog.Record(r.TenantID, r.Type, r.Message)
			}
		}
	}
	return n, err
}

// claims are the links the events ask for: an identify that carries both ids links the anonymous
// id to the user; an alias (event type ingest.ContextAliased, stored with the previous id as its
// anonymous id) links the previous id to the user.
func claims(events []warehouse.Event) []identity.Claim {
	var out []identity.Claim
	for _, e := range events {
		if e.AnonymousID == "" || e.AnonymousID == e.UserID {
			continue
		}
		var source string
		switch e.EventType {
		case ingest.ContextIdentified:
			source = identity.SourceIdentify
		case ingest.ContextAliased:
			source = identity.SourceAlias
		default:
			continue
		}
		auth := identity.AuthServer
		switch e.LinkAuth {
		case warehouse.LinkSession:
			auth = identity.AuthSession
		case warehouse.LinkVerified:
			auth = identity.AuthVerified
		}
		out = append(out, identity.Claim{TenantID: e.TenantID, ID: e.AnonymousID, UserID: e.UserID, Source: source, Auth: auth, At: e.OccurredAt})
	}
	return out
}

// resolve returns the events with each subject that is a linked id replaced by its user, for the
// rollups and profiles (the stored events keep the subject they were sent as). It returns events
// itself when none is linked.
func resolve(ctx context.Context, tx pgx.Tx, events []warehouse.Event) ([]warehouse.Event, error) {
	seen := make(map[identity.Subject]struct{}, len(events)/2)
	subjects := make([]identity.Subject, 0, len(events)/2)
	for _, e := range events {
		k := identity.Subject{TenantID: e.TenantID, ID: e.UserID}
		if _, ok := seen[k]; !ok {
			seen[k] = struct{}{}
			subjects = append(subjects, k)
		}
	}
	users, err := identity.ResolveAll(ctx, tx, subjects)
	if err != nil || len(users) == 0 {
		return events, err
	}
	out := make([]warehouse.Event, len(events))
	copy(out, events)
	for i := range out {
		if u, ok := users[identity.Subject{TenantID: out[i].TenantID, ID: out[i].UserID}]; ok {
			out[i].UserID = u
		}
	}
	return out, nil
}

// merge moves a newly linked id's rollups and profile into its user's, in the link's transaction:
// events sum, first times take the least, last times the greatest; per trait the value set most
// recently (trait_times) wins. The linked id's rows are deleted.
func (s *Sink) merge(ctx context.Context, tx pgx.Tx, l identity.Link) error {
	var p pipeline
	if s.store.SegmentRollups() {
		p.exec("merge user event stats", `
			WITH moved AS (DELETE FROM warehouse.user_event_stats WHERE tenant_id = $1 AND user_id = $2
				RETURNING event_type, events, first_at, last_at)
			INSERT INTO warehouse.user_event_stats AS s (tenant_id, event_type, user_id, events, first_at, last_at)
			SELECT $1, event_type, $3, events, first_at, last_at FROM moved ORDER BY event_type
			ON CONFLICT (tenant_id, event_type, user_id) DO UPDATE SET events = s.events + EXCLUDED.events,
				first_at = LEAST(s.first_at, EXCLUDED.first_at), last_at = GREATEST(s.last_at, EXCLUDED.last_at)`,
			l.TenantID, l.ID, l.UserID)
		p.exec("merge user property stats", `
			WITH moved AS (DELETE FROM warehouse.user_property_stats WHERE tenant_id = $1 AND user_id = $2
				RETURNING event_type, property, n, total, min, max)
			INSERT INTO warehouse.user_property_stats AS s (tenant_id, event_type, property, user_id, n, total, min, max)
			SELECT $1, event_type, property, $3, n, total, min, max FROM moved ORDER BY event_type, property
			ON CONFLICT (tenant_id, event_type, property, user_id) DO UPDATE SET n = s.n + EXCLUDED.n, total = s.total + EXCLUDED.total,
				min = LEAST(s.min, EXCLUDED.min), max = GREATEST(s.max, EXCLUDED.max)`,
			l.TenantID, l.ID, l.UserID)
	}
	p.exec("merge profiles", `
		WITH moved AS (DELETE FROM profiles WHERE tenant_id = $1 AND user_id = $2
			RETURNING traits, trait_times, first_seen_at, last_seen_at)
		INSERT INTO profiles (tenant_id, user_id, traits, trait_times, first_seen_at, last_seen_at, updated_at)
		SELECT $1, $3, traits, trait_times, first_seen_at, last_seen_at, now() FROM moved
		ON CONFLICT (tenant_id, user_id) DO UPDATE SET
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
			updated_at    = now()`,
		l.TenantID, l.ID, l.UserID)
	return p.run(ctx, tx)
}

// rollups merges profiles and updates the rollups for the new events: every statement is queued
// in one pipelined batch, in one table order and, within a table, one key order for every loader,
// so concurrent loaders wait for each other's row locks instead of deadlocking. The user sketches
// come last, so their locks (every loader of a tenant wants the current hour's) are held briefly.
func (s *Sink) rollups(ctx context.Context, tx pgx.Tx, fresh []warehouse.Event) ([]profileRow, error) {
	var p pipeline
	profiles, err := queueProfiles(&p, fresh, s.seen)
	if err != nil {
		return nil, err
	}
	if s.store.SegmentRollups() {
		queueUserStats(&p, fresh)
	}
	queueHourlyCounts(&p, fresh)
	sketches := newSketches(fresh)
	sketches.queueLocks(&p)
	if err := p.run(ctx, tx); err != nil {
		return nil, err
	}
	return profiles, sketches.store(ctx, tx)
}

// pipeline is statements sent to Postgres together (one round trip) and their results read back.
type pipeline struct {
	b     pgx.Batch
	reads []func(pgx.BatchResults) error
}

// exec queues a statement whose result is only its success; what names it in an error.
func (p *pipeline) exec(what, sql string, args ...any) {
	p.b.Queue(sql, args...)
	p.reads = append(p.reads, func(br pgx.BatchResults) error {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	})
}

// queryRow queues a query of one row, which scan reads.
func (p *pipeline) queryRow(scan func(pgx.Row) error, sql string, args ...any) {
	p.b.Queue(sql, args...)
	p.reads = append(p.reads, func(br pgx.BatchResults) error { return scan(br.QueryRow()) })
}

func (p *pipeline) run(ctx context.Context, tx pgx.Tx) error {
	if len(p.reads) == 0 {
		return nil
	}
	br := tx.SendBatch(ctx, &p.b)
	for _, read := range p.reads {
		if err := read(br); err != nil {
			_ = br.Close()
			return err
		}
	}
	return br.Close()
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

// profileRow is a user's profile delta for the batch.
type profileRow struct {
	userKey
	profileDelta
}

// queueProfiles queues the profile upsert for the batch and returns the rows it queued: the
// users with traits to merge, or whose events the stored profile may not cover yet.
func queueProfiles(p *pipeline, events []warehouse.Event, seen *seenCache) ([]profileRow, error) {
	// The rows in a slice, found through a map by user; sorted in place below.
	rows := make([]profileRow, 0, len(events)/2)
	at := make(map[userKey]int, len(events)/2)
	for _, e := range events {
		k := userKey{e.TenantID, e.UserID}
		i, found := at[k]
		if !found {
			i = len(rows)
			at[k] = i
			rows = append(rows, profileRow{userKey: k, profileDelta: profileDelta{first: e.OccurredAt, last: e.OccurredAt}})
		}
		d := &rows[i].profileDelta
		if e.OccurredAt.Before(d.first) {
			d.first = e.OccurredAt
		}
		if e.OccurredAt.After(d.last) {
			d.last = e.OccurredAt
		}
		if e.EventType == ingest.ContextIdentified {
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
	rows = seen.drop(rows)
	if len(rows) == 0 {
		return nil, nil
	}
	// A fixed lock order keeps concurrent loaders from deadlocking.
	slices.SortFunc(rows, func(a, b profileRow) int {
		if a.tenant != b.tenant {
			return cmp.Compare(a.tenant, b.tenant)
		}
		return strings.Compare(a.user, b.user)
	})
	n := len(rows)
	tenants := make([]int64, n)
	users := make([]string, n)
	traits := make([]string, n)
	firsts := make([]time.Time, n)
	lasts := make([]time.Time, n)
	times := make([]string, n)
	for i := range rows {
		r := &rows[i]
		tenants[i], users[i], firsts[i], lasts[i] = r.tenant, r.user, r.first, r.last
		traits[i], times[i] = "{}", "{}"
		if len(r.traits) > 0 {
			b, err := json.Marshal(r.traits)
			if err != nil {
				return nil, fmt.Errorf("encode traits: %w", err)
			}
			traits[i] = string(b)
			if b, err = json.Marshal(r.times); err != nil {
				return nil, fmt.Errorf("encode trait times: %w", err)
			}
			times[i] = string(b)
		}
	}
	p.exec("upsert profiles", upsertProfiles, tenants, users, traits, firsts, lasts, times)
	return rows, nil
}

// upsertProfiles merges a batch's profile rows ($1 tenants, $2 users, $3 traits, $4 first and $5
// last seen times, $6 trait times); seenCache relies on its seenSlack.
var upsertProfiles = `
		INSERT INTO profiles (tenant_id, user_id, traits, trait_times, first_seen_at, last_seen_at, updated_at)
		SELECT t, u, tr::jsonb, tt::jsonb, f, l, now()
		FROM unnest($1::bigint[], $2::text[], $3::text[], $4::timestamptz[], $5::timestamptz[], $6::text[]) AS x(t, u, tr, f, l, tt)
		-- Most users' profiles cover their events already: skip them with a look-up rather than
		-- have ON CONFLICT lock (and so write) their rows only for the WHERE below to leave them.
		-- Seen times only ever widen, so a profile that covers a user's events stays covering.
		WHERE x.tr <> '{}' OR NOT EXISTS (SELECT 1 FROM profiles p WHERE p.tenant_id = x.t AND p.user_id = x.u
			AND p.first_seen_at <= x.f AND p.last_seen_at + interval '` + seenSlackSQL + `' >= x.l)
		ON CONFLICT (tenant_id, user_id) DO UPDATE SET
			-- Per trait, the value set most recently (by occurred_at) wins. (Most updates bring
			-- no traits, only seen times: they keep the stored jsonb values as they are.)
			traits = CASE WHEN EXCLUDED.traits = '{}'::jsonb THEN profiles.traits ELSE profiles.traits || COALESCE((
				SELECT jsonb_object_agg(e.key, e.value) FROM jsonb_each(EXCLUDED.traits) AS e
				WHERE NOT profiles.trait_times ? e.key
				   OR (EXCLUDED.trait_times->>e.key)::timestamptz >= (profiles.trait_times->>e.key)::timestamptz), '{}') END,
			trait_times = CASE WHEN EXCLUDED.trait_times = '{}'::jsonb THEN profiles.trait_times ELSE profiles.trait_times || COALESCE((
				SELECT jsonb_object_agg(e.key, e.value) FROM jsonb_each(EXCLUDED.trait_times) AS e
				WHERE NOT profiles.trait_times ? e.key
				   OR (e.value #>> '{}')::timestamptz >= (profiles.trait_times->>e.key)::timestamptz), '{}') END,
			first_seen_at = LEAST(profiles.first_seen_at, EXCLUDED.first_seen_at),
			last_seen_at  = GREATEST(profiles.last_seen_at, EXCLUDED.last_seen_at),
			updated_at    = now()
		-- Rewriting a row costs a new tuple: skip when nothing would change, and keep
		-- last_seen_at to the minute.
		WHERE EXCLUDED.traits <> '{}'::jsonb
			OR EXCLUDED.first_seen_at < profiles.first_seen_at
			OR EXCLUDED.last_seen_at > profiles.last_seen_at + interval '` + seenSlackSQL + `'`

type bucketKey struct {
	tenant int64
	bucket time.Time
}

// queueHourlyCounts adds the events to ingestion_hourly.
func queueHourlyCounts(p *pipeline, events []warehouse.Event) {
	type countKey struct {
		bucketKey
		eventType string
	}
	counts := map[countKey]int64{}
	for _, e := range events {
		counts[countKey{bucketKey{e.TenantID, e.ReceivedAt.UTC().Truncate(time.Hour)}, e.EventType}]++
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
	p.exec("update hourly counts", `
		INSERT INTO ingestion_hourly (tenant_id, bucket, event_type, event_count)
		SELECT * FROM unnest($1::bigint[], $2::timestamptz[], $3::text[], $4::bigint[])
		ON CONFLICT (tenant_id, bucket, event_type) DO UPDATE SET event_count = ingestion_hourly.event_count + EXCLUDED.event_count`,
		ts, bs, es, ns)
}

// userSketches are the batch's user sketches by tenant and hour, with the stored ones read under
// lock by queueLocks.
type userSketches struct {
	keys   []bucketKey // in lock order
	add    map[bucketKey]Sketch
	stored map[bucketKey][]byte // nil: no row yet
}

func newSketches(events []warehouse.Event) *userSketches {
	us := &userSketches{add: map[bucketKey]Sketch{}, stored: map[bucketKey][]byte{}}
	for _, e := range events {
		k := bucketKey{e.TenantID, e.ReceivedAt.UTC().Truncate(time.Hour)}
		sk := us.add[k]
		if sk == nil {
			sk = NewSketch()
			us.add[k] = sk
			us.keys = append(us.keys, k)
		}
		sk.Add(e.UserID)
	}
	sort.Slice(us.keys, func(i, j int) bool {
		if us.keys[i].tenant != us.keys[j].tenant {
			return us.keys[i].tenant < us.keys[j].tenant
		}
		return us.keys[i].bucket.Before(us.keys[j].bucket)
	})
	return us
}

const lockSketch = `SELECT sketch FROM ingestion_hourly_users WHERE tenant_id = $1 AND bucket = $2 FOR UPDATE`

// queueLocks reads and locks the stored sketches: concurrent loaders serialise per bucket.
func (us *userSketches) queueLocks(p *pipeline) {
	for _, k := range us.keys {
		p.queryRow(func(row pgx.Row) error {
			var stored []byte
			if err := row.Scan(&stored); err != nil {
				if errors.Is(err, pgx.ErrNoRows) {
					return nil
				}
				return fmt.Errorf("lock user sketch: %w", err)
			}
			us.stored[k] = stored
			return nil
		}, lockSketch, k.tenant, k.bucket)
	}
}

// store writes the merged sketches, creating the rows that were missing.
func (us *userSketches) store(ctx context.Context, tx pgx.Tx) error {
	var p pipeline
	for _, k := range us.keys {
		stored := us.stored[k]
		if stored == nil {
			// No row yet: create it with this batch's sketch, unless a concurrent loader just did.
			tag, err := tx.Exec(ctx, `INSERT INTO ingestion_hourly_users (tenant_id, bucket, sketch) VALUES ($1, $2, $3)
				ON CONFLICT DO NOTHING`, k.tenant, k.bucket, []byte(us.add[k]))
			if err != nil {
				return fmt.Errorf("create user sketch: %w", err)
			}
			if tag.RowsAffected() == 1 {
				continue
			}
			if err := tx.QueryRow(ctx, lockSketch, k.tenant, k.bucket).Scan(&stored); err != nil {
				return fmt.Errorf("lock user sketch: %w", err)
			}
		}
		merged := us.add[k]
		if err := merged.Merge(stored); err != nil {
			return fmt.Errorf("merge user sketch: %w", err)
		}
		p.exec("store user sketch", `UPDATE ingestion_hourly_users SET sketch = $3 WHERE tenant_id = $1 AND bucket = $2`,
			k.tenant, k.bucket, []byte(merged))
	}
	return p.run(ctx, tx)
}
