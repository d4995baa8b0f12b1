package workflows

import (
	"errors"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/cohort-dev/cohort/activities"
)

// Hand-backs. A stopping worker cancels its heartbeating activities and fails them with
// activities.ErrTypeWorkerStopping (worker/stop.go), so another worker takes them at once. A
// retry policy would count each hand-back as an attempt, and a few rolling restarts during a long
// compute or export could use up its MaximumAttempts without one real failure. So the
// heartbeating activities that have an attempt limit treat a hand-back as non-retryable (it ends
// the call at once, using no more of the policy) and their workflow schedules the call again
// (retryHandBack), with a fresh attempt count.
const (
	// maxHandBacks bounds the hand-backs of one activity call: far more rolling restarts than
	// one call lives through, yet finite.
	maxHandBacks = 50

	handBackVersionID = "hand-back"
	// handBackRescheduled: a call ended by a hand-back is scheduled again. GetVersion is asked
	// only when a call was handed back, so executions without hand-backs keep their commands.
	handBackRescheduled = 1
)

// handBackSafe returns opts whose retry policy does not retry a hand-back (see retryHandBack).
func handBackSafe(opts workflow.ActivityOptions) workflow.ActivityOptions {
	rp := temporal.RetryPolicy{}
	if opts.RetryPolicy != nil {
		rp = *opts.RetryPolicy
	}
	rp.NonRetryableErrorTypes = append(append([]string(nil), rp.NonRetryableErrorTypes...), activities.ErrTypeWorkerStopping)
	opts.RetryPolicy = &rp
	return opts
}

// isHandBack says whether err is an activity call ended by a stopping worker's hand-back.
func isHandBack(err error) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.Type() == activities.ErrTypeWorkerStopping
}

// retryHandBack says whether to schedule again a call (with options from handBackSafe) that
// ended with err, counting the hand-backs in n: when err is a hand-back and fewer than
// maxHandBacks came before.
func retryHandBack(ctx workflow.Context, err error, n *int) bool {
	if !isHandBack(err) || *n >= maxHandBacks {
		return false
	}
	if workflow.GetVersion(ctx, handBackVersionID, workflow.DefaultVersion, handBackRescheduled) < handBackRescheduled {
		return false
	}
	*n++
	return true
}
