package segment

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/startjob"
)

// Starter starts the segment workflows (workflows.Starter in production). The service
// records the state change, calls the starter, and undoes the record when the start fails.
type Starter interface {
	// Compute asks for a compute of the segment (joining a running one) and returns the
	// workflow id; Recompute asks for one with the newest definition.
	Compute(ctx context.Context, tenantID, segmentID int64) (string, error)
	Recompute(ctx context.Context, tenantID, segmentID int64) (string, error)
	// Export starts the export workflow of a recorded export.
	Export(ctx context.Context, tenantID, segmentID, exportID int64) error
	// Draft runs the drafting workflow and waits for its result.
	Draft(ctx context.Context, tenantID, segmentID int64) (*Segment, error)
	// SetRefresh makes the segment's refresh schedule run every interval (creating it or
	// updating it in place); every 0 deletes it, and deleting a missing schedule is no error.
	SetRefresh(ctx context.Context, tenantID, segmentID int64, every time.Duration) error
}

// starterFor returns the starter, or an error when the service was built without one (the
// worker's service starts no workflows).
func (s *Service) starterFor(what string) (Starter, error) {
	if s.starter == nil {
		return nil, fmt.Errorf("%w: %s cannot be started here", errs.ErrUnavailable, what)
	}
	return s.starter, nil
}

// Compute marks the segment queued and asks its compute workflow for a run, returning the
// segment and the workflow id. When the workflow cannot be started (Temporal unreachable, or
// the caller went away mid-start) the segment is not left queued: it shows the failure in
// last_error, and the error says why.
func (s *Service) Compute(ctx context.Context, tenantID, id int64) (*Segment, string, error) {
	return s.queueCompute(ctx, tenantID, id, false)
}

func (s *Service) queueCompute(ctx context.Context, tenantID, id int64, recompute bool) (*Segment, string, error) {
	st, err := s.starterFor("computes")
	if err != nil {
		return nil, "", err
	}
	start := st.Compute
	if recompute {
		start = st.Recompute
	}
	var seg *Segment
	var wf string
	// The start runs on the caller's context: a client that goes away mid-start fails it, and
	// the segment is not left queued.
	err = startjob.RecordStartUndo(ctx, startjob.Caller,
		func(ctx context.Context) (err error) {
			seg, err = s.MarkQueued(ctx, tenantID, id)
			return err
		},
		func(ctx context.Context) (err error) {
			wf, err = start(ctx, tenantID, id)
			return err
		},
		func(ctx context.Context) error {
			if err := s.unqueue(ctx, tenantID, id, "could not start the compute: the workflow service is unavailable"); err != nil {
				return fmt.Errorf("record the failed start of segment %d: %w", id, err)
			}
			return nil
		})
	if err != nil {
		return nil, "", err
	}
	return seg, wf, nil
}

// unqueue records a compute that could not be started, unless the workflow got the request
// after all and has already moved the segment on.
func (s *Service) unqueue(ctx context.Context, tenantID, id int64, msg string) error {
	return s.db.WithContext(ctx).Exec(`UPDATE segments SET status = 'error', last_error = ?, updated_at = ?
		WHERE tenant_id = ? AND id = ? AND status = 'queued'`, truncate(msg, 2000), s.now().UTC(), tenantID, id).Error
}

// Patch applies a PATCH (see Update) and, when the definition changed, queues a recompute (ai
// drafts wait for an explicit compute: drafting does not go through here). A PATCH that sends
// the definition the segment already has queues one too when that definition's compute never
// started (a start that failed left the segment in error with no run of its version): the
// retry of a request that answered 503 then does what the request asked.
func (s *Service) Patch(ctx context.Context, tenantID, id int64, in UpdateInput) (*Segment, error) {
	res, err := s.Update(ctx, tenantID, id, in)
	if err != nil {
		return nil, err
	}
	if !res.DefinitionChanged {
		if len(in.Definition) == 0 || res.Segment.Status != StatusError {
			return res.Segment, nil
		}
		started, err := s.versionStarted(ctx, tenantID, id, res.Segment.Version)
		if err != nil || started {
			return res.Segment, err
		}
	}
	seg, _, err := s.queueCompute(ctx, tenantID, id, true)
	return seg, err
}

// versionStarted says whether a compute of the segment's version ever began (a run recorded).
func (s *Service) versionStarted(ctx context.Context, tenantID, id int64, version int) (bool, error) {
	var started bool
	if err := s.db.WithContext(ctx).Raw(`SELECT EXISTS (SELECT 1 FROM segment_runs WHERE tenant_id = ? AND segment_id = ? AND version = ?)`,
		tenantID, id, version).Scan(&started).Error; err != nil {
		return false, fmt.Errorf("runs of segment %d: %w", id, err)
	}
	return started, nil
}

// StartExport records a queued export of the segment's members and starts its workflow. When
// the workflow cannot be started the export is recorded as failed and the error says why.
func (s *Service) StartExport(ctx context.Context, tenantID, segmentID int64, in ExportInput) (*Export, error) {
	st, err := s.starterFor("exports")
	if err != nil {
		return nil, err
	}
	var e *Export
	err = startjob.RecordStartUndo(ctx, startjob.Caller,
		func(ctx context.Context) (err error) {
			e, err = s.CreateExport(ctx, tenantID, segmentID, in)
			return err
		},
		func(ctx context.Context) error { return st.Export(ctx, tenantID, segmentID, e.ID) },
		func(ctx context.Context) error {
			if err := s.db.WithContext(ctx).Exec(`UPDATE segment_exports SET status = 'error', error = ?, finished_at = ?
			WHERE tenant_id = ? AND id = ? AND status = 'queued'`,
				"could not start the export: the workflow service is unavailable", s.now().UTC(), tenantID, e.ID).Error; err != nil {
				return fmt.Errorf("record the failed start of export %d: %w", e.ID, err)
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// Draftable says whether the segment can be drafted from its description: an ai segment with a
// description. The drafting activity checks it when it runs.
func (s *Segment) Draftable() error {
	if s.SegmentType != KindAI {
		return errs.Coded(errs.ErrInvalid, "not_ai_segment", "only segments of type ai are drafted from their description")
	}
	if strings.TrimSpace(s.Description) == "" {
		return errs.Coded(errs.ErrInvalid, "no_description", "the segment has no description to draft from; PATCH one first")
	}
	return nil
}

// Draft drafts a definition of one of the tenant's segments from its description and waits for
// the drafting workflow (which checks Draftable and validates the definition).
func (s *Service) Draft(ctx context.Context, tenantID, id int64) (*Segment, error) {
	st, err := s.starterFor("drafts")
	if err != nil {
		return nil, err
	}
	if _, _, err := s.head(ctx, tenantID, id); err != nil {
		return nil, err
	}
	return st.Draft(ctx, tenantID, id)
}

// refreshInterval is a stored refresh_every_secs as a schedule interval (0: off).
func refreshInterval(secs *int) time.Duration {
	if secs == nil {
		return 0
	}
	return time.Duration(*secs) * time.Second
}

// setRefreshInTx changes the refresh schedule of a segment whose row tx holds locked, before tx
// commits, so the database never records an interval the schedule does not have. It returns
// the undo for a commit that fails afterwards.
func (s *Service) setRefreshInTx(ctx context.Context, tenantID, id int64, from, to time.Duration) (func() error, error) {
	st, err := s.starterFor("refresh schedules")
	if err != nil {
		return nil, err
	}
	undo := func() error {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), startjob.UndoTimeout)
		defer cancel()
		if err := st.SetRefresh(uctx, tenantID, id, from); err != nil {
			return fmt.Errorf("restore the refresh schedule of segment %d: %w", id, err)
		}
		return nil
	}
	if err := st.SetRefresh(ctx, tenantID, id, to); err != nil {
		if ctx.Err() != nil {
			// Cancelled mid-call: the change may have reached Temporal. Put the old one back.
			if uerr := undo(); uerr != nil {
				return nil, errors.Join(err, uerr)
			}
		}
		return nil, err
	}
	return undo, nil
}

// commitWithSchedule runs fn in a transaction; when fn changed the schedule (undo set) and the
// transaction then fails, the schedule is put back.
func (s *Service) commitWithSchedule(ctx context.Context, fn func(tx *gorm.DB, undo *func() error) error) error {
	var undo func() error
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return fn(tx, &undo) })
	if err != nil && undo != nil {
		if uerr := undo(); uerr != nil {
			return errors.Join(err, uerr)
		}
	}
	return err
}
