package connector

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"gorm.io/gorm"

	"github.com/cohort-dev/cohort/internal/connector/platform"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/startjob"

	"github.com/cohort-dev/cohort/internal/store"
)

// Sync triggers and run statuses.
const (
	TriggerRecompute = "recompute" // a segment recompute finished
	TriggerManual    = "manual"    // POST /api/activations/<id>/sync/
	TriggerReplay    = "replay"    // the workflow was reset (temporal workflow reset)

	RunQueued    = "queued"
	RunRunning   = "running"
	RunSucceeded = "succeeded"
	RunFailed    = "failed"
)

// SyncRun is one sync of a connector (GET /api/activations/<id>/runs/).
type SyncRun struct {
	ID            int64      `json:"id"`
	TenantID      int64      `json:"-"`
	ConnectorID   int64      `json:"connector_id"`
	SegmentRunID  *int64     `json:"segment_run_id"`
	Trigger       string     `json:"trigger"`
	WorkflowID    string     `json:"workflow_id"`
	TemporalRunID *string    `json:"-"`
	SegmentID     int64      `json:"-" gorm:"-"` // set by RequestSync: the workflow's search attribute
	Status        string     `json:"status"`
	CreatedAt     time.Time  `json:"created_at"`
	StartedAt     *time.Time `json:"started_at"`
	FinishedAt    *time.Time `json:"finished_at"`
	Added         int64      `json:"added"`
	Removed       int64      `json:"removed"`
	Skipped       int64      `json:"skipped"`
	Failed        int64      `json:"failed"`
	Error         *string    `json:"error"`
}

func (SyncRun) TableName() string { return "activation_sync_runs" }

// Limits of GET /runs/.
const (
	DefaultRunsLimit = 20
	MaxRunsLimit     = 100
)

// Runs returns a connector's newest runs first.
func (s *Service) Runs(ctx context.Context, tenantID, id int64, limit int) ([]SyncRun, error) {
	if _, err := getRow(ctx, s.db, tenantID, id, false); err != nil {
		return nil, err
	}
	out := []SyncRun{}
	err := s.db.WithContext(ctx).Where("tenant_id = ? AND connector_id = ?", tenantID, id).
		Order("id DESC").Limit(limit).Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("runs of connector %d: %w", id, err)
	}
	return out, nil
}

// Run returns one of the tenant's sync runs.
func (s *Service) Run(ctx context.Context, tenantID, runID int64) (*SyncRun, error) {
	var run SyncRun
	err := s.db.WithContext(ctx).Where("tenant_id = ? AND id = ?", tenantID, runID).Take(&run).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fmt.Errorf("sync run %d: %w", runID, errs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("load sync run %d: %w", runID, err)
	}
	return &run, nil
}

// SyncStarter starts the workflow of a queued manual sync run (workflows.Starter in
// production); SyncWorkflowID names that workflow before it starts (the run records it).
type SyncStarter interface {
	SyncWorkflowID(tenantID, connectorID, syncRunID int64) string
	StartSync(ctx context.Context, tenantID, segmentID, connectorID, syncRunID int64) error
}

// startFailedMessage is the error of a run whose workflow could not be started.
const startFailedMessage = "the sync could not be started: workflows unavailable"

// RequestSync queues a manual sync of the connector, whatever its status, and starts its
// workflow; the run is returned queued with its workflow id. When the workflow cannot be started
// the run does not stay queued: it is recorded failed, and the error (503) says why.
func (s *Service) RequestSync(ctx context.Context, tenantID, id int64) (*SyncRun, error) {
	if s.starter == nil {
		return nil, fmt.Errorf("%w: syncs cannot be started here", errs.ErrUnavailable)
	}
	// A client that goes away after the run was queued must not leave it queued without a
	// workflow (Detached).
	var run *SyncRun
	err := startjob.RecordStartUndo(ctx, startjob.Detached,
		func(ctx context.Context) (err error) {
			run, err = s.queueSync(ctx, tenantID, id)
			return err
		},
		func(ctx context.Context) error { return s.starter.StartSync(ctx, tenantID, run.SegmentID, id, run.ID) },
		func(ctx context.Context) error {
			if err := s.failQueued(ctx, tenantID, run.ID, startFailedMessage); err != nil {
				return fmt.Errorf("record the failed start of sync run %d: %w", run.ID, err)
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	return run, nil
}

// queueSync records a queued manual run named by the starter's workflow ID for its id.
func (s *Service) queueSync(ctx context.Context, tenantID, id int64) (*SyncRun, error) {
	var run *SyncRun
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		r, err := getRow(ctx, tx, tenantID, id, false)
		if err != nil {
			return err
		}
		run = &SyncRun{TenantID: tenantID, ConnectorID: id, SegmentID: r.SegmentID, Trigger: TriggerManual, WorkflowID: "-", Status: RunQueued, CreatedAt: s.clock()}
		if err := tx.Create(run).Error; err != nil {
			return fmt.Errorf("queue sync: %w", err)
		}
		run.WorkflowID = s.starter.SyncWorkflowID(tenantID, id, run.ID)
		return tx.Model(run).Update("workflow_id", run.WorkflowID).Error
	})
	return run, err
}

// failQueued marks a queued run failed (its workflow could not be started); a run its workflow
// has claimed meanwhile is left to it.
func (s *Service) failQueued(ctx context.Context, tenantID, runID int64, msg string) error {
	return s.db.WithContext(ctx).Exec(
		"UPDATE activation_sync_runs SET status = ?, error = ?, finished_at = ? WHERE tenant_id = ? AND id = ? AND status = ?",
		RunFailed, msg, s.clock(), tenantID, runID, RunQueued).Error
}

// BeginInput starts (or resumes) a sync run from its workflow.
type BeginInput struct {
	TenantID      int64
	ConnectorID   int64
	SegmentRunID  int64 // 0 for manual syncs
	SyncRunID     int64 // the queued run of a manual sync; 0 otherwise
	Trigger       string
	WorkflowID    string
	TemporalRunID string
}

// ErrSkip means the sync must not run: the connector stopped being active after the recompute
// fanned out to it.
var ErrSkip = errors.New("connector is not active")

// BeginSync claims the run the workflow execution works on: the same one again when the
// activity is retried; the queued run of a manual sync; otherwise a new run, marked replay when
// the workflow ID already has runs (temporal workflow reset). A recompute-triggered first
// execution of a connector that is no longer active returns ErrSkip.
func (s *Service) BeginSync(ctx context.Context, in BeginInput) (*SyncRun, error) {
	var run *SyncRun
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		r, err := getRow(ctx, tx, in.TenantID, in.ConnectorID, true)
		if err != nil {
			return err
		}
		var existing []SyncRun
		if err := tx.Where("tenant_id = ? AND workflow_id = ?", in.TenantID, in.WorkflowID).Order("id").Find(&existing).Error; err != nil {
			return fmt.Errorf("find sync runs: %w", err)
		}
		now := s.clock()
		for i := range existing {
			e := &existing[i]
			if e.TemporalRunID != nil && *e.TemporalRunID == in.TemporalRunID {
				run = e
				return nil
			}
			if e.ID == in.SyncRunID && e.Status == RunQueued {
				e.Status, e.StartedAt, e.TemporalRunID = RunRunning, &now, &in.TemporalRunID
				run = e
				return tx.Model(e).Updates(map[string]any{"status": RunRunning, "started_at": now, "temporal_run_id": in.TemporalRunID}).Error
			}
		}
		trigger := in.Trigger
		if len(existing) > 0 {
			trigger = TriggerReplay
		} else if trigger == TriggerRecompute && r.Status != StatusActive {
			return ErrSkip
		}
		run = &SyncRun{TenantID: in.TenantID, ConnectorID: in.ConnectorID, Trigger: trigger, WorkflowID: in.WorkflowID,
			TemporalRunID: &in.TemporalRunID, Status: RunRunning, CreatedAt: now, StartedAt: &now}
		if in.SegmentRunID > 0 {
			run.SegmentRunID = &in.SegmentRunID
		}
		if err := tx.Create(run).Error; err != nil {
			return fmt.Errorf("start sync run: %w", err)
		}
		return nil
	})
	return run, err
}

// FinishSync records the end of a run. Success: the run succeeded, the connector's
// last_synced_at moves and its error clears (an error connector is active again; an inactive one
// stays paused). Failure (msg != ""): the run failed, last_error holds msg and an active
// connector goes to error.
func (s *Service) FinishSync(ctx context.Context, tenantID, runID int64, msg string) error {
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var run SyncRun
		if err := tx.Where("tenant_id = ? AND id = ?", tenantID, runID).Take(&run).Error; errors.Is(err, gorm.ErrRecordNotFound) {
			return fmt.Errorf("sync run %d: %w", runID, errs.ErrNotFound)
		} else if err != nil {
			return fmt.Errorf("load sync run %d: %w", runID, err)
		}
		now := s.clock()
		if msg == "" {
			if err := tx.Exec("UPDATE activation_sync_runs SET status = ?, finished_at = ?, error = NULL WHERE tenant_id = ? AND id = ?",
				RunSucceeded, now, tenantID, runID).Error; err != nil {
				return fmt.Errorf("finish sync run: %w", err)
			}
			return tx.Exec(`UPDATE activation_connectors SET last_synced_at = ?, last_error = NULL, updated_at = ?,
				status = CASE WHEN status = 'error' THEN 'active' ELSE status END WHERE tenant_id = ? AND id = ?`,
				now, now, tenantID, run.ConnectorID).Error
		}
		if err := tx.Exec("UPDATE activation_sync_runs SET status = ?, finished_at = ?, error = ? WHERE tenant_id = ? AND id = ?",
			RunFailed, now, msg, tenantID, runID).Error; err != nil {
			return fmt.Errorf("fail sync run: %w", err)
		}
		return tx.Exec(`UPDATE activation_connectors SET last_error = ?, updated_at = ?,
			status = CASE WHEN status = 'active' THEN 'error' ELSE status END WHERE tenant_id = ? AND id = ?`,
			msg, now, tenantID, run.ConnectorID).Error
	})
}

// Counts are a sync's totals.
type Counts struct {
	Added, Removed, Skipped, Failed int64
}

// Push runs a sync: removes first (members the platform holds that left the segment), then adds
// (members the platform does not hold yet), each in the platform's chunk size, recording after
// every acknowledged chunk what the platform now holds and the run's counts. A retried Push
// resumes where the last attempt stopped. Only one Push of a connector runs at a time (a
// session advisory lock; a second waits). progress is called after every chunk.
func (s *Service) Push(ctx context.Context, tenantID, runID int64, p platform.Platform, progress func()) (Counts, error) {
	run, err := s.Run(ctx, tenantID, runID)
	if err != nil {
		return Counts{}, err
	}
	r, err := getRow(ctx, s.db, tenantID, run.ConnectorID, false)
	if err != nil {
		return Counts{}, err
	}
	// At most MaxConcurrentSyncs pushes run in this process; the others wait here (the activity
	// keeps heartbeating).
	select {
	case s.syncSlots <- struct{}{}:
		defer func() { <-s.syncSlots }()
	case <-ctx.Done():
		return Counts{}, ctx.Err()
	}
	// The connector's lock lives on a connection of its own, outside the pool: a sync waiting
	// minutes on a platform holds no pooled connection, and its queries borrow one per chunk.
	// Closing the connection (or losing it with the worker) releases the lock.
	lockConn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return Counts{}, fmt.Errorf("open the sync lock connection: %w", err)
	}
	defer func() { _ = lockConn.Close(context.WithoutCancel(ctx)) }()
	key, err := store.LockKey(store.LockConnectorSync, r.ID)
	if err != nil {
		return Counts{}, err
	}
	if _, err := lockConn.Exec(ctx, "SELECT pg_advisory_lock($1)", key); err != nil {
		return Counts{}, fmt.Errorf("wait for the connector's other sync: %w", err)
	}
	// Every attempt walks all pending members again: skipped and failed are this attempt's.
	if _, err := s.pool.Exec(ctx, "UPDATE activation_sync_runs SET skipped = 0, failed = 0 WHERE tenant_id = $1 AND id = $2", tenantID, runID); err != nil {
		return Counts{}, fmt.Errorf("reset counts: %w", err)
	}
	e := &engine{s: s, tenantID: tenantID, connectorID: r.ID, segmentID: r.SegmentID, runID: runID, p: p, progress: progress}
	if err := e.pass(ctx, false); err != nil {
		return e.counts, err
	}
	if err := e.pass(ctx, true); err != nil {
		return e.counts, err
	}
	var c Counts
	err = s.pool.QueryRow(ctx, "SELECT added, removed, skipped, failed FROM activation_sync_runs WHERE tenant_id = $1 AND id = $2",
		tenantID, runID).Scan(&c.Added, &c.Removed, &c.Skipped, &c.Failed)
	return c, err
}

type engine struct {
	s                                *Service
	tenantID, connectorID, segmentID int64
	runID                            int64
	p                                platform.Platform
	progress                         func()
	counts                           Counts // this attempt's
}

// The pending changes read, and record writes, only the tenant's rows of activation_members:
// every query and join filters tenant_id as well as the (global) connector id. The table's key is
// (connector_id, user_id) without the tenant, so the upsert cannot store a row beside another
// tenant's row under the same key; its WHERE leaves that row untouched (the member stays
// pending). Connector ids are global, so such a row only comes from a bug or a hand edit.
const (
	pendingRemoves = `SELECT a.user_id, coalesce(a.email, ''), coalesce(a.platform_id, '')
FROM activation_members a
WHERE a.tenant_id = $1 AND a.connector_id = $2 AND a.present AND a.user_id > $4
  AND NOT EXISTS (SELECT 1 FROM segment_members m WHERE m.tenant_id = $1 AND m.segment_id = $3 AND m.user_id = a.user_id)
ORDER BY a.user_id LIMIT $5`
	pendingAdds = `SELECT m.user_id, coalesce(p.traits->>'email', ''),
  CASE WHEN a.email IS NOT DISTINCT FROM p.traits->>'email' THEN coalesce(a.platform_id, '') ELSE '' END
FROM segment_members m
LEFT JOIN activation_members a ON a.tenant_id = m.tenant_id AND a.connector_id = $2 AND a.user_id = m.user_id
LEFT JOIN profiles p ON p.tenant_id = m.tenant_id AND p.user_id = m.user_id
WHERE m.tenant_id = $1 AND m.segment_id = $3 AND m.user_id > $4 AND a.present IS NOT TRUE
ORDER BY m.user_id LIMIT $5`
)

// pass walks the pending removes or adds in user_id order, one platform chunk at a time.
func (e *engine) pass(ctx context.Context, adds bool) error {
	query, chunk := pendingRemoves, e.p.RemoveChunk()
	if adds {
		query, chunk = pendingAdds, e.p.AddChunk()
	}
	after := ""
	for {
		rows, err := e.s.pool.Query(ctx, query, e.tenantID, e.connectorID, e.segmentID, after, chunk)
		if err != nil {
			return fmt.Errorf("read pending changes: %w", err)
		}
		var batch []platform.Member
		for rows.Next() {
			var m platform.Member
			if err := rows.Scan(&m.UserID, &m.Email, &m.PlatformID); err != nil {
				rows.Close()
				return fmt.Errorf("read pending changes: %w", err)
			}
			batch = append(batch, m)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read pending changes: %w", err)
		}
		if len(batch) == 0 {
			return nil
		}
		after = batch[len(batch)-1].UserID
		var out platform.Outcome
		if adds {
			out, err = e.p.Add(ctx, batch)
		} else {
			out, err = e.p.Remove(ctx, batch)
		}
		if err != nil {
			return err
		}
		if err := e.record(ctx, adds, out); err != nil {
			return err
		}
		if e.progress != nil {
			e.progress()
		}
		if len(batch) < chunk {
			return nil
		}
	}
}

// record stores what a chunk achieved, in one transaction: the members the platform now holds
// (or no longer holds) and the run's counts. When it fails (the chunk's record rolled back, the
// platform having applied it) the chunk is still pending, so the next attempt sends it again:
// platform calls are idempotent, and the counts move only with the record, so none counts twice.
// The attempt's counts move once the transaction has committed.
func (e *engine) record(ctx context.Context, adds bool, out platform.Outcome) error {
	done := out.Done
	if !adds {
		done = append(slices.Clip(done), out.Gone...)
	}
	users := make([]string, len(done))
	emails := make([]string, len(done))
	ids := make([]string, len(done))
	for i, m := range done {
		users[i], emails[i], ids[i] = m.UserID, m.Email, m.PlatformID
	}
	now := e.s.clock()
	var added, removed int64
	if adds {
		added = int64(len(out.Done))
	} else {
		removed = int64(len(out.Done))
	}
	err := pgx.BeginFunc(ctx, e.s.pool, func(tx pgx.Tx) error {
		if len(users) > 0 && adds {
			_, err := tx.Exec(ctx, `INSERT INTO activation_members (tenant_id, connector_id, user_id, email, platform_id, present, synced_at)
SELECT $1, $2, t.u, nullif(t.e, ''), nullif(t.p, ''), true, $3 FROM unnest($4::text[], $5::text[], $6::text[]) AS t(u, e, p)
ON CONFLICT (connector_id, user_id) DO UPDATE SET present = true, email = EXCLUDED.email, synced_at = EXCLUDED.synced_at,
  platform_id = coalesce(EXCLUDED.platform_id,
    CASE WHEN activation_members.email IS NOT DISTINCT FROM EXCLUDED.email THEN activation_members.platform_id END)
WHERE activation_members.tenant_id = EXCLUDED.tenant_id`,
				e.tenantID, e.connectorID, now, users, emails, ids)
			if err != nil {
				return fmt.Errorf("record adds: %w", err)
			}
		}
		if len(users) > 0 && !adds {
			_, err := tx.Exec(ctx, `UPDATE activation_members a SET present = false, synced_at = $3,
  platform_id = coalesce(nullif(t.p, ''), a.platform_id)
FROM unnest($4::text[], $5::text[]) AS t(u, p)
WHERE a.tenant_id = $1 AND a.connector_id = $2 AND a.user_id = t.u`,
				e.tenantID, e.connectorID, now, users, ids)
			if err != nil {
				return fmt.Errorf("record removes: %w", err)
			}
		}
		_, err := tx.Exec(ctx, `UPDATE activation_sync_runs SET added = added + $3, removed = removed + $4,
  skipped = skipped + $5, failed = failed + $6 WHERE tenant_id = $1 AND id = $2`,
			e.tenantID, e.runID, added, removed, out.Skipped, out.Failed)
		if err != nil {
			return fmt.Errorf("record counts: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record the chunk: %w", err)
	}
	e.counts.Added += added
	e.counts.Removed += removed
	e.counts.Skipped += int64(out.Skipped)
	e.counts.Failed += int64(out.Failed)
	return nil
}
