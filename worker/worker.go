// Package worker runs the worker role: it registers workflows and activities on the Temporal task
// queue and runs the consumers beside them (the event loader, which reads the bus, Pub/Sub or NATS
// JetStream, into the warehouse; the product embedding sweeper). cmd/cohort builds its Deps.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/cohort-dev/cohort/workflows"
)

// Registration adds workflows and activities to a Temporal worker. Each capability contributes one.
type Registration func(r sdkworker.Registry)

// Consumer is a long-running loop the worker role runs beside Temporal (the event loader, the
// embedding sweeper). Run returns when ctx ends.
type Consumer interface {
	Name() string
	Run(ctx context.Context) error
}

// Deps of the worker role.
type Deps struct {
	Temporal      client.Client
	TaskQueue     string
	Logger        *slog.Logger
	Registrations []Registration
	Consumers     []Consumer
	// StopTimeout is how long a stopping worker lets its running activities finish (Temporal's
	// WorkerStopTimeout) once it has stopped polling; config.WorkerStopTimeout. Activities with a
	// heartbeat timeout are asked to hand back at once instead (see activityTracker). Zero
	// cancels every running activity as the stop begins.
	StopTimeout time.Duration
}

// handBackWait bounds how long a stopped worker waits, after Temporal's stop timeout, for the
// activities it cancelled to return, so that their failure reaches the server (and is retried at
// once elsewhere) before the client closes.
const handBackWait = 5 * time.Second

// Worker runs the registered workflows, activities and consumers.
type Worker struct {
	d Deps
}

// New returns the worker role of d; Run starts it.
func New(d Deps) *Worker { return &Worker{d: d} }

// Run blocks until ctx ends or a part fails; it stops every part before returning.
func (w *Worker) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if len(w.d.Registrations) > 0 {
		tr := &activityTracker{}
		tw := sdkworker.New(w.d.Temporal, w.d.TaskQueue, sdkworker.Options{
			WorkerStopTimeout: w.d.StopTimeout,
			Interceptors:      []interceptor.WorkerInterceptor{tr},
		})
		for _, reg := range w.d.Registrations {
			reg(tw)
		}
		if err := tw.Start(); err != nil {
			return fmt.Errorf("start temporal worker: %w", err)
		}
		// The stop begins as soon as ctx ends, beside the consumers' own, so that the loader's
		// last batch does not eat into the activities' stop timeout.
		stopped := make(chan struct{})
		go func() {
			<-ctx.Done()
			w.stopTemporal(tw, tr)
			close(stopped)
		}()
		defer func() {
			cancel()
			<-stopped
		}()
		w.d.Logger.Info("temporal worker started", "task_queue", w.d.TaskQueue, "stop_timeout", w.d.StopTimeout.String())
	} else {
		w.d.Logger.Info("no workflows registered; temporal worker not started", "task_queue", w.d.TaskQueue)
	}
	if len(w.d.Consumers) == 0 {
		<-ctx.Done()
		return nil
	}
	// Consumers run until ctx ends; the first one to fail stops the others.
	errc := make(chan error, len(w.d.Consumers))
	for _, c := range w.d.Consumers {
		go func() {
			err := c.Run(ctx)
			if err != nil && !errors.Is(err, context.Canceled) {
				errc <- fmt.Errorf("%s: %w", c.Name(), err)
				return
			}
			errc <- nil
		}()
	}
	var first error
	for range w.d.Consumers {
		if err := <-errc; err != nil && first == nil {
			first = err
			cancel()
		}
	}
	return first
}

// stopTemporal stops tw gracefully: it stops polling, lets the running activities finish within
// the stop timeout (heartbeating ones hand back at once), then waits a moment for those it had
// to cancel, so that every activity's outcome reaches the server before the client closes. It
// logs what was running and how each ended.
func (w *Worker) stopTemporal(tw sdkworker.Worker, tr *activityTracker) {
	start := time.Now()
	running := tr.beginStop()
	w.d.Logger.Info("temporal worker stopping: polling stopped, running activities finish or hand back",
		"task_queue", w.d.TaskQueue, "running_activities", running, "stop_timeout", w.d.StopTimeout.String())
	tw.Stop()
	left := tr.wait(handBackWait)
	s := tr.stopStats()
	level := slog.LevelInfo
	if left > 0 || s.cancelled > 0 {
		level = slog.LevelWarn
	}
	w.d.Logger.Log(context.Background(), level, "temporal worker stopped",
		"task_queue", w.d.TaskQueue, "took", time.Since(start).Round(time.Millisecond).String(),
		"completed", s.completed, "failed", s.failed, "handed_back", s.handedBack,
		"cancelled_at_timeout", s.cancelled, "still_running", left)
}

// Workflows registers every workflow of Cohort (workflows.All), each under its name.
func Workflows(r sdkworker.Registry) {
	for _, d := range workflows.All() {
		r.RegisterWorkflowWithOptions(d.Func, workflow.RegisterOptions{Name: d.Name})
	}
}
