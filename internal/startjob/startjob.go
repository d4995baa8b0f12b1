// Package startjob is the one way a service records a state change that starts a workflow:
// record, then start, then undo the record when the start fails. It holds the timeouts of the
// start and of the undo and the contexts they run on, so every service behaves alike. It imports
// no Temporal: the start is the service's own starter interface.
package startjob

import (
	"context"
	"errors"
	"time"
)

// Timeouts of a start once its state change is recorded, and of the undo after a failed start.
const (
	StartTimeout = 30 * time.Second
	UndoTimeout  = 10 * time.Second
)

// StartOn says which context a start runs on.
type StartOn int

const (
	// Detached: the start runs on a context of its own (StartTimeout): a caller that goes away
	// once the change is recorded must not leave it without a started workflow, so the start
	// goes through (or fails and is undone) whatever the caller does.
	Detached StartOn = iota
	// Caller: the start runs on the caller's context; a caller that goes away mid-start fails
	// the start, and the record is undone.
	Caller
)

// RecordStartUndo runs record on ctx; when it succeeds, start (on the context on says); when
// start fails, undo, on a context of its own (UndoTimeout; the caller's may be what failed). It
// returns record's error, or start's joined with undo's. A nil record is a change recorded
// before the call.
func RecordStartUndo(ctx context.Context, on StartOn, record, start, undo func(context.Context) error) error {
	if record != nil {
		if err := record(ctx); err != nil {
			return err
		}
	}
	sctx := ctx
	if on == Detached {
		var cancel context.CancelFunc
		sctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), StartTimeout)
		defer cancel()
	}
	err := start(sctx)
	if err == nil {
		return nil
	}
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), UndoTimeout)
	defer cancel()
	if uerr := undo(uctx); uerr != nil {
		return errors.Join(err, uerr)
	}
	return err
}
