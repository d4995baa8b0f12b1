package startjob_test

import (
	"context"
	"errors"
	"testing"

	"github.com/cohort-dev/cohort/internal/startjob"
)

func TestRecordStartUndo(t *testing.T) {
	errRecord, errStart, errUndo := errors.New("record"), errors.New("start"), errors.New("undo")
	cases := []struct {
		name string
		on   startjob.StartOn
		// cancelInRecord cancels the caller's context once the change is recorded (a client
		// that goes away).
		cancelInRecord     bool
		recordErr, undoErr error
		startErr           error
		want               []error // errors.Is of the result; none: nil
		wantSteps          string
		wantStartCancelled bool
	}{
		{name: "started", on: startjob.Detached, wantSteps: "rs"},
		{name: "record fails", on: startjob.Detached, recordErr: errRecord, want: []error{errRecord}, wantSteps: "r"},
		{name: "start fails, undone", on: startjob.Detached, startErr: errStart, want: []error{errStart}, wantSteps: "rsu"},
		{name: "start and undo fail", on: startjob.Caller, startErr: errStart, undoErr: errUndo, want: []error{errStart, errUndo}, wantSteps: "rsu"},
		{name: "detached start outlives the caller", on: startjob.Detached, cancelInRecord: true, wantSteps: "rs"},
		{name: "caller start ends with the caller, undone", on: startjob.Caller, cancelInRecord: true, want: []error{context.Canceled}, wantSteps: "rsu", wantStartCancelled: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			steps := ""
			startCancelled := false
			err := startjob.RecordStartUndo(ctx, tc.on,
				func(context.Context) error {
					steps += "r"
					if tc.cancelInRecord {
						cancel()
					}
					return tc.recordErr
				},
				func(ctx context.Context) error {
					steps += "s"
					if _, ok := ctx.Deadline(); !ok && tc.on == startjob.Detached {
						t.Error("a detached start has no deadline")
					}
					if ctx.Err() != nil {
						startCancelled = true
						return ctx.Err()
					}
					return tc.startErr
				},
				func(ctx context.Context) error {
					steps += "u"
					if ctx.Err() != nil {
						t.Errorf("undo ran on an ended context: %v", ctx.Err())
					}
					if _, ok := ctx.Deadline(); !ok {
						t.Error("the undo has no deadline")
					}
					return tc.undoErr
				})
			if steps != tc.wantSteps || startCancelled != tc.wantStartCancelled {
				t.Fatalf("steps %q (start cancelled %v), want %q (%v)", steps, startCancelled, tc.wantSteps, tc.wantStartCancelled)
			}
			if len(tc.want) == 0 && err != nil {
				t.Fatalf("error %v, want none", err)
			}
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Fatalf("error %v, want %v in it", err, w)
				}
			}
		})
	}
}
