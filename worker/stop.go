package worker

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"

	"github.com/cohort-dev/cohort/activities"
)

// ErrTypeWorkerStopping is the failure type of an activity handed back by a stopping worker: a
// retryable failure, so the server schedules the next attempt at once (on another worker)
// instead of waiting for the attempt's timeout. A heartbeating activity's retry resumes from its
// last heartbeat where it keeps one (catalogue imports).
// Workflows whose heartbeating activities have an attempt limit schedule a handed-back call
// again rather than retry it (workflows/handback.go), so hand-backs use none of its attempts.
const ErrTypeWorkerStopping = activities.ErrTypeWorkerStopping

// errHandBack is the cause of the cancellation a stopping worker gives heartbeating activities.
var errHandBack = errors.New("the worker is stopping: activity handed back for another worker")

// activityTracker counts the activities a worker runs, so that its stop can say what it
// finished, and cancels the heartbeating ones (those with a heartbeat timeout: long, and able to
// resume or start again) as soon as the stop begins, so they hand back within the stop timeout.
type activityTracker struct {
	interceptor.WorkerInterceptorBase

	mu       sync.Mutex
	running  int
	stopping bool
	idle     chan struct{} // closed when running drops to 0 after the stop began
	stats    stopStats
}

// stopStats is how the activities running at or after the stop began ended.
type stopStats struct {
	completed  int // returned a result
	failed     int // returned an error of their own
	handedBack int // heartbeating, cancelled at the stop and failed as retryable
	cancelled  int // cancelled by the stop timeout (ErrWorkerShutdown)
}

func (t *activityTracker) InterceptActivity(_ context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	a := &trackedActivity{t: t}
	a.Next = next
	return a
}

// beginStop marks the stop and returns how many activities run.
func (t *activityTracker) beginStop() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopping = true
	t.idle = make(chan struct{})
	if t.running == 0 {
		close(t.idle)
	}
	return t.running
}

// wait waits up to d for the running activities to return and says how many still run.
func (t *activityTracker) wait(d time.Duration) int {
	t.mu.Lock()
	idle := t.idle
	t.mu.Unlock()
	select {
	case <-idle:
	case <-time.After(d):
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.running
}

func (t *activityTracker) stopStats() stopStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stats
}

func (t *activityTracker) started() {
	t.mu.Lock()
	t.running++
	t.mu.Unlock()
}

func (t *activityTracker) ended(count func(*stopStats)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.running--
	if t.stopping {
		count(&t.stats)
		if t.running == 0 {
			// An activity may start after the stop began (a task polled just before it) and end
			// once idle is closed already: close it once.
			select {
			case <-t.idle:
			default:
				close(t.idle)
			}
		}
	}
}

type trackedActivity struct {
	interceptor.ActivityInboundInterceptorBase
	t *activityTracker
}

func (a *trackedActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	a.t.started()
	ctx, handBack := a.handBackOnStop(ctx)
	res, err := a.Next.ExecuteActivity(ctx, in)
	handedBack := handBack()
	if handedBack && err != nil {
		err = temporal.NewApplicationErrorWithCause(errHandBack.Error(), ErrTypeWorkerStopping, err)
	}
	a.t.ended(func(s *stopStats) {
		switch {
		case err == nil:
			s.completed++
		case handedBack:
			s.handedBack++
		case ctx.Err() != nil:
			s.cancelled++
		default:
			s.failed++
		}
	})
	return res, err
}

// handBackOnStop gives an activity with a heartbeat timeout a context cancelled when the worker
// starts to stop. The returned func ends the watch and says whether the stop cancelled it.
func (a *trackedActivity) handBackOnStop(ctx context.Context) (context.Context, func() bool) {
	if !activity.IsActivity(ctx) || activity.GetInfo(ctx).HeartbeatTimeout <= 0 {
		return ctx, func() bool { return false }
	}
	stop := activity.GetWorkerStopChannel(ctx)
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-stop:
			cancel(errHandBack)
		case <-done:
		}
	}()
	return ctx, func() bool {
		close(done)
		<-watched
		handedBack := errors.Is(context.Cause(ctx), errHandBack)
		cancel(nil)
		return handedBack
	}
}
