package load

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cohort-dev/cohort/internal/errs"
)

// Stats reads the rollups the loader maintains; it never scans raw events.
type Stats struct {
	pool *pgxpool.Pool
	now  func() time.Time
}

func NewStats(pool *pgxpool.Pool, now func() time.Time) *Stats { return &Stats{pool: pool, now: now} }

// Bucket is one point of the time series.
type Bucket struct {
	Bucket      time.Time `json:"bucket"`
	EventCount  int64     `json:"event_count"`
	UniqueUsers int64     `json:"unique_users"`
}

// TypeCount is one event type's count in the window.
type TypeCount struct {
	EventType string `json:"event_type"`
	Count     int64  `json:"count"`
}

// StatsResult is GET /api/ingestion/stats/. Counts are by receipt time. unique_users values are
// HyperLogLog estimates (standard error ~0.8%).
type StatsResult struct {
	Window      string      `json:"window"`
	TotalEvents int64       `json:"total_events"`
	UniqueUsers int64       `json:"unique_users"`
	Timeseries  []Bucket    `json:"timeseries"`
	EventTypes  []TypeCount `json:"event_types"`
}

// Window parses the window parameter: "" (24h), "24h" or "7d".
func Window(s string) (string, time.Duration, time.Duration, error) {
	switch s {
	case "", "24h":
		return "24h", 24 * time.Hour, time.Hour, nil
	case "7d":
		return "7d", 7 * 24 * time.Hour, 24 * time.Hour, nil
	}
	return "", 0, 0, errs.Invalid("window", "must be 24h or 7d")
}

// Get computes the stats of a tenant for the window: hourly buckets for 24h, daily for 7d; the
// current (partial) bucket is the last one, and empty buckets are present with zeros.
func (s *Stats) Get(ctx context.Context, tenantID int64, window string) (StatsResult, error) {
	name, span, step, err := Window(window)
	if err != nil {
		return StatsResult{}, err
	}
	now := s.now().UTC()
	end := now.Truncate(step).Add(step) // exclusive end of the current bucket
	if step == 24*time.Hour {
		end = time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC).Add(step)
	}
	start := end.Add(-span)
	n := int(span / step)
	res := StatsResult{Window: name, Timeseries: make([]Bucket, n), EventTypes: []TypeCount{}}
	for i := range res.Timeseries {
		res.Timeseries[i].Bucket = start.Add(time.Duration(i) * step)
	}
	index := func(t time.Time) int { return int(t.Sub(start) / step) }

	rows, err := s.pool.Query(ctx, `SELECT bucket, event_type, event_count FROM ingestion_hourly
		WHERE tenant_id = $1 AND bucket >= $2 AND bucket < $3`, tenantID, start, end)
	if err != nil {
		return StatsResult{}, fmt.Errorf("read hourly counts: %w", err)
	}
	types := map[string]int64{}
	for rows.Next() {
		var b time.Time
		var et string
		var c int64
		if err := rows.Scan(&b, &et, &c); err != nil {
			rows.Close()
			return StatsResult{}, fmt.Errorf("read hourly counts: %w", err)
		}
		if i := index(b.UTC()); i >= 0 && i < n {
			res.Timeseries[i].EventCount += c
		}
		types[et] += c
		res.TotalEvents += c
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return StatsResult{}, fmt.Errorf("read hourly counts: %w", err)
	}
	for et, c := range types {
		res.EventTypes = append(res.EventTypes, TypeCount{EventType: et, Count: c})
	}
	sort.Slice(res.EventTypes, func(i, j int) bool {
		if res.EventTypes[i].Count != res.EventTypes[j].Count {
			return res.EventTypes[i].Count > res.EventTypes[j].Count
		}
		return res.EventTypes[i].EventType < res.EventTypes[j].EventType
	})

	rows, err = s.pool.Query(ctx, `SELECT bucket, sketch FROM ingestion_hourly_users
		WHERE tenant_id = $1 AND bucket >= $2 AND bucket < $3`, tenantID, start, end)
	if err != nil {
		return StatsResult{}, fmt.Errorf("read user sketches: %w", err)
	}
	total := NewSketch()
	per := make([]Sketch, n)
	for rows.Next() {
		var b time.Time
		var sk []byte
		if err := rows.Scan(&b, &sk); err != nil {
			rows.Close()
			return StatsResult{}, fmt.Errorf("read user sketches: %w", err)
		}
		if err := total.Merge(sk); err != nil {
			continue
		}
		if i := index(b.UTC()); i >= 0 && i < n {
			if per[i] == nil {
				per[i] = NewSketch()
			}
			_ = per[i].Merge(sk)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return StatsResult{}, fmt.Errorf("read user sketches: %w", err)
	}
	for i, sk := range per {
		if sk != nil {
			res.Timeseries[i].UniqueUsers = sk.Estimate()
		}
	}
	res.UniqueUsers = total.Estimate()
	return res, nil
}

// LoaderAlive reports whether a loader sent a heartbeat within three intervals.
func LoaderAlive(ctx context.Context, pool *pgxpool.Pool, now time.Time) error {
	var last *time.Time
	if err := pool.QueryRow(ctx, `SELECT max(last_seen_at) FROM worker_heartbeats WHERE role = 'loader'`).Scan(&last); err != nil {
		return fmt.Errorf("read heartbeats: %w", err)
	}
	if last == nil {
		return fmt.Errorf("no event loader has reported")
	}
	if age := now.Sub(*last); age > 3*HeartbeatInterval {
		return fmt.Errorf("no loader heartbeat for %s", age.Round(time.Second))
	}
	return nil
}
