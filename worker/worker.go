// Package worker wires the worker role: it registers workflows and activities on the Temporal
// task queue and runs the background consumers (the Pub/Sub loader, once ingestion is built).
package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
)

// Registration adds workflows and activities to a Temporal worker. Each capability contributes one.
type Registration func(r sdkworker.Registry)

// Consumer is a long-running loop the worker role runs beside Temporal (for example the Pub/Sub
// event loader). Run returns when ctx ends.
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

func New(d Deps) *Worker { return &Worker{d: d} }

// Run blocks until ctx ends or a part fails; it stops every part before returning.
func (w *Worker) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1+len(w.d.Consumers))
	running := 0
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
		w.d.Logger.Info("no workflows registered yet; temporal worker idle", "task_queue", w.d.TaskQueue)
	}
	for _, c := range w.d.Consumers {
		running++
		go func() {
			if err := c.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				errc <- fmt.Errorf("%s: %w", c.Name(), err)
				return
			}
			errc <- nil
		}()
	}
	select {
	case <-ctx.Done():
	case err := <-errc:
		running--
		if err != nil {
			cancel()
			for ; running > 0; running-- {
				<-errc
			}
			return err
		}
	}
	cancel()
	for ; running > 0; running-- {
		<-errc
	}
	return nil
}
