package page

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/startjob"
)

const jobColumns = "id, status, total, completed, failed, created_at, finished_at"

func scanJob(row pgx.Row) (*BulkJob, error) {
	var j BulkJob
	if err := row.Scan(&j.ID, &j.Status, &j.Total, &j.Completed, &j.Failed, &j.CreatedAt, &j.FinishedAt); err != nil {
		return nil, err
	}
	return &j, nil
}

func jobNotFound(id int64) error {
	return errs.Coded(errs.ErrNotFound, "not_found", "bulk job %d not found", id)
}

// bulkStartFailedMessage is the error of the pages of a bulk job that could not be started.
const bulkStartFailedMessage = "bulk generation could not be started: the workflow service was unavailable"

// BulkGenerate records a bulk generation job over the tenant's active AIQueries and starts it:
// one page per query, the query's existing page (its oldest) when it has one, else a new page
// (slug derived from the query text, title the query text, not published). Pages are marked
// generating. Queries whose page cannot be created because the tenant's page limit is reached
// are recorded in the job as failed pages with the reason. A job without pages to generate is
// complete at once. When the job cannot be started its pending pages fail with the reason, the
// job ends partial_failure, and the error is 503 generation_unavailable.
func (s *Service) BulkGenerate(ctx context.Context, tenantID int64) (*BulkStarted, error) {
	if s.gen == nil {
		return nil, generationUnavailable(errors.New("no generator in this process"))
	}
	var (
		jobID   int64
		pending int
	)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		limit, count, err := lockTenantPages(ctx, tx, tenantID)
		if err != nil {
			return err
		}
		type query struct {
			id   int64
			text string
		}
		rows, err := tx.Query(ctx, `SELECT id, text FROM ai_queries WHERE tenant_id = $1 AND active ORDER BY id`, tenantID)
		if err != nil {
			return fmt.Errorf("load active AIQueries: %w", err)
		}
		queries, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (query, error) {
			var q query
			return q, r.Scan(&q.id, &q.text)
		})
		if err != nil {
			return fmt.Errorf("load active AIQueries: %w", err)
		}
		ids := make([]int64, len(queries))
		for i, q := range queries {
			ids[i] = q.id
		}
		type existing struct {
			pageID int64
			slug   string
		}
		byQuery := map[int64]existing{}
		rows, err = tx.Query(ctx, `SELECT DISTINCT ON (query_id) query_id, id, slug FROM generated_pages
			WHERE tenant_id = $1 AND query_id = ANY($2::bigint[]) ORDER BY query_id, id`, tenantID, ids)
		if err != nil {
			return fmt.Errorf("load pages of AIQueries: %w", err)
		}
		for rows.Next() {
			var q int64
			var e existing
			if err := rows.Scan(&q, &e.pageID, &e.slug); err != nil {
				rows.Close()
				return fmt.Errorf("load pages of AIQueries: %w", err)
			}
			byQuery[q] = e
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("load pages of AIQueries: %w", err)
		}
		now := s.now().UTC()
		if err := tx.QueryRow(ctx, `INSERT INTO page_bulk_jobs (tenant_id, status, total, created_at) VALUES ($1, 'pending', $2, $3) RETURNING id`,
			tenantID, len(queries), now).Scan(&jobID); err != nil {
			return fmt.Errorf("create bulk job: %w", err)
		}
		var (
			ns              []int32
			queryIDs        []int64
			pageIDs         []*int64
			slugs, statuses []string
			messages        []*string
			reused          []int64
			failed          int
		)
		taken := map[string]bool{}
		limitMsg := fmt.Sprintf("your page limit of %d pages is reached", limit)
		for i, q := range queries {
			ns = append(ns, int32(i+1))
			queryIDs = append(queryIDs, q.id)
			if e, ok := byQuery[q.id]; ok {
				id := e.pageID
				pageIDs = append(pageIDs, &id)
				slugs = append(slugs, e.slug)
				statuses = append(statuses, JobPagePending)
				messages = append(messages, nil)
				reused = append(reused, id)
				pending++
				continue
			}
			base := deriveSlug(q.text)
			if count >= limit {
				pageIDs = append(pageIDs, nil)
				slugs = append(slugs, "")
				statuses = append(statuses, JobPageError)
				msg := limitMsg
				messages = append(messages, &msg)
				failed++
				continue
			}
			if err := takenSlugs(ctx, tx, tenantID, base, taken); err != nil {
				return err
			}
			slug := uniqueSlug(base, taken)
			var id int64
			if err := tx.QueryRow(ctx, `INSERT INTO generated_pages (tenant_id, query_id, slug, title, status, created_at, updated_at)
				VALUES ($1, $2, $3, $4, 'generating', $5, $5) RETURNING id`, tenantID, q.id, slug, q.text, now).Scan(&id); err != nil {
				return fmt.Errorf("create page for AIQuery %d: %w", q.id, err)
			}
			taken[slug] = true
			count++
			pageIDs = append(pageIDs, &id)
			slugs = append(slugs, slug)
			statuses = append(statuses, JobPagePending)
			messages = append(messages, nil)
			pending++
		}
		if len(reused) > 0 {
			if _, err := tx.Exec(ctx, `UPDATE generated_pages SET status = 'generating', last_error = NULL, updated_at = $3
				WHERE tenant_id = $1 AND id = ANY($2::bigint[])`, tenantID, reused, now); err != nil {
				return fmt.Errorf("mark pages generating: %w", err)
			}
		}
		if len(ns) > 0 {
			if _, err := tx.Exec(ctx, `INSERT INTO page_bulk_job_pages (tenant_id, job_id, n, query_id, page_id, slug, status, error)
				SELECT $1, $2, u.n, u.query_id, u.page_id, u.slug, u.status, u.error
				FROM unnest($3::int[], $4::bigint[], $5::bigint[], $6::text[], $7::text[], $8::text[]) AS u(n, query_id, page_id, slug, status, error)`,
				tenantID, jobID, ns, queryIDs, pageIDs, slugs, statuses, messages); err != nil {
				return fmt.Errorf("record bulk job pages: %w", err)
			}
		}
		if pending == 0 {
			// Nothing to generate: the job is done as recorded.
			status := JobComplete
			if failed > 0 {
				status = JobPartialFailure
			}
			_, err = tx.Exec(ctx, `UPDATE page_bulk_jobs SET failed = $3, status = $4, finished_at = $5 WHERE tenant_id = $1 AND id = $2`,
				tenantID, jobID, failed, status, now)
		} else if failed > 0 {
			_, err = tx.Exec(ctx, `UPDATE page_bulk_jobs SET failed = $3 WHERE tenant_id = $1 AND id = $2`, tenantID, jobID, failed)
		}
		if err != nil {
			return fmt.Errorf("update bulk job %d: %w", jobID, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.cache.invalidate()
	out := &BulkStarted{JobID: jobID, Status: "queued"}
	if pending == 0 {
		return out, nil
	}
	err = startjob.RecordStartUndo(ctx, startjob.Detached, nil,
		func(ctx context.Context) error {
			if err := s.gen.StartBulk(ctx, tenantID, jobID); err != nil {
				return generationUnavailable(err)
			}
			return nil
		},
		func(ctx context.Context) error { return s.failBulkStart(ctx, tenantID, jobID) })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// failBulkStart records a bulk job that could not be started: its pending pages fail (and their
// pages still generating go to error), the job ends partial_failure.
func (s *Service) failBulkStart(ctx context.Context, tenantID, jobID int64) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		now := s.now().UTC()
		rows, err := tx.Query(ctx, `UPDATE page_bulk_job_pages SET status = 'error', error = $3
			WHERE tenant_id = $1 AND job_id = $2 AND status = 'pending' RETURNING page_id`, tenantID, jobID, bulkStartFailedMessage)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[*int64])
		if err != nil {
			return err
		}
		var pageIDs []int64
		for _, id := range ids {
			if id != nil {
				pageIDs = append(pageIDs, *id)
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE generated_pages SET status = 'error', last_error = $3, updated_at = $4
			WHERE tenant_id = $1 AND id = ANY($2::bigint[]) AND status = 'generating'`, tenantID, pageIDs, bulkStartFailedMessage, now); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE page_bulk_jobs SET failed = failed + $3, status = 'partial_failure', finished_at = $4
			WHERE tenant_id = $1 AND id = $2`, tenantID, jobID, len(ids), now)
		return err
	})
	if err != nil {
		return fmt.Errorf("record the failed start of bulk job %d: %w", jobID, err)
	}
	s.cache.invalidate()
	return nil
}

// ListBulkJobs returns the tenant's most recent bulk jobs (at most MaxJobsListed), newest first.
func (s *Service) ListBulkJobs(ctx context.Context, tenantID int64) ([]*BulkJob, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+jobColumns+" FROM page_bulk_jobs WHERE tenant_id = $1 ORDER BY id DESC LIMIT $2", tenantID, MaxJobsListed)
	if err != nil {
		return nil, fmt.Errorf("list bulk jobs: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*BulkJob, error) { return scanJob(r) })
	if err != nil {
		return nil, fmt.Errorf("list bulk jobs: %w", err)
	}
	if out == nil {
		out = []*BulkJob{}
	}
	return out, nil
}

// BulkJob returns one of the tenant's bulk jobs with its pages in the job's order.
func (s *Service) BulkJob(ctx context.Context, tenantID, jobID int64) (*BulkJobDetail, error) {
	j, err := scanJob(s.pool.QueryRow(ctx, "SELECT "+jobColumns+" FROM page_bulk_jobs WHERE tenant_id = $1 AND id = $2", tenantID, jobID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, jobNotFound(jobID)
	}
	if err != nil {
		return nil, fmt.Errorf("load bulk job %d: %w", jobID, err)
	}
	pages, err := s.bulkPages(ctx, tenantID, jobID)
	if err != nil {
		return nil, err
	}
	return &BulkJobDetail{BulkJob: *j, Pages: pages}, nil
}

// BulkPages returns the pages of one of the tenant's bulk jobs in the job's order; the generation
// works on those pending with a page id.
func (s *Service) BulkPages(ctx context.Context, tenantID, jobID int64) ([]BulkJobPage, error) {
	var one int
	err := s.pool.QueryRow(ctx, "SELECT 1 FROM page_bulk_jobs WHERE tenant_id = $1 AND id = $2", tenantID, jobID).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, jobNotFound(jobID)
	}
	if err != nil {
		return nil, fmt.Errorf("load bulk job %d: %w", jobID, err)
	}
	return s.bulkPages(ctx, tenantID, jobID)
}

func (s *Service) bulkPages(ctx context.Context, tenantID, jobID int64) ([]BulkJobPage, error) {
	rows, err := s.pool.Query(ctx, `SELECT page_id, query_id, slug, status, error FROM page_bulk_job_pages
		WHERE tenant_id = $1 AND job_id = $2 ORDER BY n`, tenantID, jobID)
	if err != nil {
		return nil, fmt.Errorf("load bulk job %d pages: %w", jobID, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (BulkJobPage, error) {
		var p BulkJobPage
		return p, r.Scan(&p.PageID, &p.QueryID, &p.Slug, &p.Status, &p.Error)
	})
	if err != nil {
		return nil, fmt.Errorf("load bulk job %d pages: %w", jobID, err)
	}
	if out == nil {
		out = []BulkJobPage{}
	}
	return out, nil
}

// MarkBulkRunning moves a pending job to running (a job already running or finished stays).
func (s *Service) MarkBulkRunning(ctx context.Context, tenantID, jobID int64) error {
	var status string
	err := s.pool.QueryRow(ctx, `UPDATE page_bulk_jobs SET status = CASE WHEN status = 'pending' THEN 'running' ELSE status END
		WHERE tenant_id = $1 AND id = $2 RETURNING status`, tenantID, jobID).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return jobNotFound(jobID)
	}
	if err != nil {
		return fmt.Errorf("mark bulk job %d running: %w", jobID, err)
	}
	return nil
}

// FinishBulkPage records the outcome of one page of a job: ready when genErr is nil, else error
// with its message; the job's completed or failed goes up by one in the same statement. A page
// already finished in the job is left as is (a retried call counts once).
func (s *Service) FinishBulkPage(ctx context.Context, tenantID, jobID, pageID int64, genErr error) error {
	status, msg := JobPageReady, (*string)(nil)
	if genErr != nil {
		status = JobPageError
		m := truncate(genErr.Error(), MaxErrorLength)
		msg = &m
	}
	var id int64
	err := s.pool.QueryRow(ctx, `WITH p AS (
			UPDATE page_bulk_job_pages SET status = $4, error = $5
			WHERE tenant_id = $1 AND job_id = $2 AND page_id = $3 AND status = 'pending'
			RETURNING status
		)
		UPDATE page_bulk_jobs SET
			completed = completed + (SELECT count(*) FROM p WHERE status = 'ready'),
			failed = failed + (SELECT count(*) FROM p WHERE status = 'error')
		WHERE tenant_id = $1 AND id = $2 RETURNING id`, tenantID, jobID, pageID, status, msg).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return jobNotFound(jobID)
	}
	if err != nil {
		return fmt.Errorf("finish page %d of bulk job %d: %w", pageID, jobID, err)
	}
	return nil
}

// pagesLostMessage is the error of job pages still pending when their job finishes.
const pagesLostMessage = "the page was deleted or its generation did not report back"

// FinishBulk ends a job: pages still pending fail (their page was deleted, or the generation
// never reported them), and the job is complete when no page failed, else partial_failure, with
// finished_at now. It returns the job as finished.
func (s *Service) FinishBulk(ctx context.Context, tenantID, jobID int64) (*BulkJob, error) {
	var out *BulkJob
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE page_bulk_job_pages SET status = 'error', error = $3
			WHERE tenant_id = $1 AND job_id = $2 AND status = 'pending'`, tenantID, jobID, pagesLostMessage)
		if err != nil {
			return fmt.Errorf("finish bulk job %d pages: %w", jobID, err)
		}
		out, err = scanJob(tx.QueryRow(ctx, `UPDATE page_bulk_jobs SET failed = failed + $3,
				status = CASE WHEN failed + $3 > 0 THEN 'partial_failure' ELSE 'complete' END,
				finished_at = coalesce(finished_at, $4)
			WHERE tenant_id = $1 AND id = $2 RETURNING `+jobColumns, tenantID, jobID, tag.RowsAffected(), s.now().UTC()))
		if errors.Is(err, pgx.ErrNoRows) {
			return jobNotFound(jobID)
		}
		if err != nil {
			return fmt.Errorf("finish bulk job %d: %w", jobID, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
