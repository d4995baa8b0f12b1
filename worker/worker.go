// Package worker runs the worker role: it registers workflows and activities on the Temporal task
// queue and runs the consumers beside them (the event loader, which reads the bus, Pub/Sub or NATS
// JetStream, into the warehouse; the product embedding sweeper). cmd/cohort builds its Deps.
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"go.temporal.io/sdk/client"
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
}

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
		tw := sdkworker.New(w.d.Temporal, w.d.TaskQueue, sdkworker.Options{})
		for _, reg := range w.d.Registrations {
			reg(tw)
		}
		if err := tw.Start(); err != nil {
			return fmt.Errorf("start temporal worker: %w", err)
		}
		defer tw.Stop()
		w.d.Logger.Info("temporal worker started", "task_queue", w.d.TaskQueue)
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

// Workflows registers every workflow of Cohort (workflows.All), each under its name.
func Workflows(r sdkworker.Registry) {
	for _, d := range workflows.All() {
		r.RegisterWorkflowWithOptions(d.Func, workflow.RegisterOptions{Name: d.Name})
	}
}
