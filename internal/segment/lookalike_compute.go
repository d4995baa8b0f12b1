package segment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/segment/lookalike"
)

// Lookalike features: for each of the tenant's most frequent event types, the user's event count,
// monetary sum (the first numeric of amount, total, revenue, value, price) and days since the
// latest such event (capped at a year; a year when never).
const (
	lookalikeTypes      = 12
	lookalikeRecencyCap = 365.0
)

// ErrEmptySeed: the seed segment has no members with events.
var ErrEmptySeed = errors.New("the seed segment has no members with events; compute it first")

func (s *Service) loadLookalike(ctx context.Context, tx pgx.Tx, tenantID int64, raw json.RawMessage, runner Runner) error {
	if runner != nil && runner.Dialect() != Postgres {
		return errs.Coded(errs.ErrInvalid, "lookalike_unsupported", "lookalike segments need the embedded Postgres warehouse in this release")
	}
	ld, err := ParseLookalike(raw)
	if err != nil {
		return err
	}
	seedRows, err := tx.Query(ctx, `SELECT user_id FROM segment_members WHERE tenant_id = $1 AND segment_id = $2`, tenantID, ld.SeedSegmentID)
	if err != nil {
		return fmt.Errorf("load seed: %w", err)
	}
	seedIDs, err := pgx.CollectRows(seedRows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("load seed: %w", err)
	}
	seed := make(map[string]struct{}, len(seedIDs))
	for _, id := range seedIDs {
		seed[id] = struct{}{}
	}
	if len(seed) == 0 {
		return fmt.Errorf("seed segment %d: %w", ld.SeedSegmentID, ErrEmptySeed)
	}
	typeRows, err := tx.Query(ctx, `SELECT event_type FROM warehouse.user_event_stats WHERE tenant_id = $1
		GROUP BY event_type ORDER BY sum(events) DESC, event_type LIMIT $2`, tenantID, lookalikeTypes)
	if err != nil {
		return fmt.Errorf("load event types: %w", err)
	}
	types, err := pgx.CollectRows(typeRows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("load event types: %w", err)
	}
	index := map[string]int{}
	names := make([]string, 0, 3*len(types))
	for i, t := range types {
		index[t] = i
		names = append(names, "count:"+t, "sum:"+t, "recency_days:"+t)
	}
	m := lookalike.NewMatrix(names, 0)
	// From the per-user rollups: one row per user and event type, the monetary sum of the first
	// of amount, total, revenue, value, price the user has. Users are canonical: rows of an id
	// linked to a user (its history from before the link) add into the user's.
	rows, err := tx.Query(ctx, `WITH m AS (
			SELECT DISTINCT ON (user_id, event_type) user_id, event_type, total FROM warehouse.user_property_stats
			WHERE tenant_id = $1 AND event_type = ANY($2) AND property IN ('amount', 'total', 'revenue', 'value', 'price')
			ORDER BY user_id, event_type, array_position(ARRAY['amount', 'total', 'revenue', 'value', 'price'], property))
		SELECT COALESCE(l.user_id, s.user_id) AS user_id, s.event_type, sum(s.events)::float8, sum(COALESCE(m.total, 0))::float8, max(s.last_at)
		FROM warehouse.user_event_stats s LEFT JOIN m ON m.user_id = s.user_id AND m.event_type = s.event_type
			LEFT JOIN identity_links l ON l.tenant_id = $1 AND l.anonymous_id = s.user_id
		WHERE s.tenant_id = $1 AND s.event_type = ANY($2)
		GROUP BY 1, 2
		ORDER BY 1`, tenantID, types)
	if err != nil {
		return fmt.Errorf("load features: %w", err)
	}
	now := s.now()
	cur := ""
	row := make([]float64, len(names))
	reset := func() {
		for i := range types {
			row[3*i], row[3*i+1], row[3*i+2] = 0, 0, lookalikeRecencyCap
		}
	}
	reset()
	for rows.Next() {
		var user, et string
		var n, sum float64
		var last time.Time
		if err := rows.Scan(&user, &et, &n, &sum, &last); err != nil {
			rows.Close()
			return fmt.Errorf("load features: %w", err)
		}
		if user != cur {
			if cur != "" {
				if err := m.Add(cur, row); err != nil {
					rows.Close()
					return err
				}
			}
			cur = user
			reset()
		}
		i := index[et]
		if math.IsInf(sum, 0) || math.IsNaN(sum) {
			sum = 0
		}
		row[3*i], row[3*i+1] = n, sum
		row[3*i+2] = math.Min(lookalikeRecencyCap, math.Max(0, now.Sub(last).Hours()/24))
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load features: %w", err)
	}
	if cur != "" {
		if err := m.Add(cur, row); err != nil {
			return err
		}
	}
	opts := lookalike.Options{Size: ld.Size, MaxSize: MaxLookalikeSize}
	if ld.MinSimilarity != nil {
		opts.MinSimilarity = *ld.MinSimilarity
	}
	scored, err := lookalike.Score(m, seed, opts)
	if errors.Is(err, lookalike.ErrEmptySeed) {
		return fmt.Errorf("seed segment %d: %w", ld.SeedSegmentID, ErrEmptySeed)
	}
	if err != nil {
		return fmt.Errorf("score lookalikes: %w", err)
	}
	_, err = tx.CopyFrom(ctx, pgx.Identifier{"seg_new"}, []string{"user_id", "score"}, pgx.CopyFromSlice(len(scored), func(i int) ([]any, error) {
		return []any{scored[i].UserID, scored[i].Percentile}, nil
	}))
	if err != nil {
		return fmt.Errorf("load lookalike members: %w", err)
	}
	return nil
}
