package bigquery

import (
	"context"
	"errors"
	"fmt"

	"cloud.google.com/go/bigquery"
	"google.golang.org/api/iterator"

	"github.com/cohort-dev/cohort/internal/segment"
)

// Segments runs compiled segment queries in BigQuery (segment.Runner).
type Segments struct {
	w *Writer
}

// Segments returns the segment query runner over the writer's client and table.
func (w *Writer) Segments() *Segments { return &Segments{w: w} }

var _ segment.Runner = (*Segments)(nil)

func (s *Segments) Dialect() segment.Dialect { return segment.BigQuery }
func (s *Segments) Table() string            { return s.w.TableID() }

func (s *Segments) query(q *segment.Query, segParams map[string][]string, sql string) (*bigquery.Query, error) {
	if q.Dialect != segment.BigQuery {
		return nil, fmt.Errorf("bigquery: query compiled for %s", q.Dialect)
	}
	bq := s.w.client.Query(sql)
	for _, p := range q.Params {
		bq.Parameters = append(bq.Parameters, bigquery.QueryParameter{Name: p.Name, Value: p.Value})
	}
	for name := range q.SegmentParams {
		ids, ok := segParams[name]
		if !ok {
			return nil, fmt.Errorf("bigquery: no members bound for @%s", name)
		}
		if ids == nil {
			ids = []string{}
		}
		bq.Parameters = append(bq.Parameters, bigquery.QueryParameter{Name: name, Value: ids})
	}
	return bq, nil
}

// Users streams the matching user ids.
func (s *Segments) Users(ctx context.Context, q *segment.Query, segParams map[string][]string, fn func(string) error) error {
	bq, err := s.query(q, segParams, q.SQL)
	if err != nil {
		return err
	}
	it, err := bq.Read(ctx)
	if err != nil {
		return fmt.Errorf("bigquery: run segment query: %w", err)
	}
	for {
		var row []bigquery.Value
		err := it.Next(&row)
		if errors.Is(err, iterator.Done) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("bigquery: read segment rows: %w", err)
		}
		id, _ := row[0].(string)
		if err := fn(id); err != nil {
			return err
		}
	}
}

// CountAndSample returns the number of matching users and the first limit ids.
func (s *Segments) CountAndSample(ctx context.Context, q *segment.Query, segParams map[string][]string, limit int) (int64, []string, error) {
	if limit == 0 {
		// LIMIT 0 returns no row to carry the total: only count (running the LIMIT 0 query as
		// well would be a second billed job whose answer is thrown away).
		return s.count(ctx, q, segParams)
	}
	bq, err := s.query(q, segParams, q.CountAndSample(limit))
	if err != nil {
		return 0, nil, err
	}
	it, err := bq.Read(ctx)
	if err != nil {
		return 0, nil, fmt.Errorf("bigquery: run preview: %w", err)
	}
	var total int64
	sample := []string{}
	for {
		var row []bigquery.Value
		err := it.Next(&row)
		if errors.Is(err, iterator.Done) {
			break
		}
		if err != nil {
			return 0, nil, fmt.Errorf("bigquery: read preview rows: %w", err)
		}
		id, _ := row[0].(string)
		n, _ := row[1].(int64)
		sample, total = append(sample, id), n
	}
	return total, sample, nil
}

// count runs q.Count(): the number of matching users, with an empty sample.
func (s *Segments) count(ctx context.Context, q *segment.Query, segParams map[string][]string) (int64, []string, error) {
	cq, err := s.query(q, segParams, q.Count())
	if err != nil {
		return 0, nil, err
	}
	it, err := cq.Read(ctx)
	if err != nil {
		return 0, nil, fmt.Errorf("bigquery: count preview: %w", err)
	}
	var row []bigquery.Value
	// A failed read must not pass for "no matching user".
	if err := it.Next(&row); err != nil {
		return 0, nil, fmt.Errorf("bigquery: read preview count: %w", err)
	}
	total, ok := row[0].(int64)
	if !ok {
		return 0, nil, fmt.Errorf("bigquery: preview count is %T, want INT64", row[0])
	}
	return total, []string{}, nil
}
