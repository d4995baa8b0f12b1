package ingest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cohort-dev/cohort/internal/bus"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/ingest/wire"
	"github.com/cohort-dev/cohort/internal/metrics"
	"github.com/cohort-dev/cohort/internal/warehouse"
)

// PublishTimeout bounds how long a request waits for the bus to acknowledge its events.
const PublishTimeout = 10 * time.Second

// Publisher hands accepted events to the bus and returns once the bus has stored them.
// Every event's payload is a valid JSON object: Service sees to it (Decode checks what clients
// send, PublishEvents what webhooks build), so a publisher need not check it again.
type Publisher interface {
	Publish(ctx context.Context, tenantID int64, events []warehouse.Event) error
	Check(ctx context.Context) error
}

// BusPublisher publishes to the event bus (Pub/Sub or NATS JetStream).
type BusPublisher struct {
	s       bus.Sender
	kind    string // the bus's name in metrics
	metrics *metrics.Metrics
}

// NewBusPublisher publishes through s. With WithMetrics it records each publish's latency (under
// the bus's Kind, when s names it) and the events accepted.
func NewBusPublisher(s bus.Sender, opts ...Option) *BusPublisher {
	p := &BusPublisher{s: s, metrics: apply(opts).metrics}
	if k, ok := s.(interface{ Kind() string }); ok {
		p.kind = k.Kind()
	}
	return p
}

// Option configures a Service or a BusPublisher.
type Option func(*options)

type options struct {
	metrics *metrics.Metrics
}

func apply(opts []Option) options {
	var o options
	for _, f := range opts {
		f(&o)
	}
	return o
}

// WithMetrics records into m.
func WithMetrics(m *metrics.Metrics) Option { return func(o *options) { o.metrics = m } }

// Publish encodes the events as one wire.Message (or several, when one would be too large for the
// bus) and waits until the bus has stored every one. An error means the caller must not count
// the events as accepted: some may be stored, and the loader stores an event id once.
func (p *BusPublisher) Publish(ctx context.Context, tenantID int64, events []warehouse.Event) error {
	// A bus that does not answer must not hold requests (and their clients) forever: 503 instead.
	ctx, cancel := context.WithTimeout(ctx, PublishTimeout)
	defer cancel()
	return p.publish(ctx, tenantID, events)
}

func (p *BusPublisher) publish(ctx context.Context, tenantID int64, events []warehouse.Event) error {
	data, err := wire.EncodeMessage(tenantID, events)
	if err != nil {
		return fmt.Errorf("encode message: %w", err)
	}
	if len(data) > p.s.MaxMessageBytes() && len(events) > 1 {
		half := len(events) / 2
		if err := p.publish(ctx, tenantID, events[:half]); err != nil {
			return err
		}
		return p.publish(ctx, tenantID, events[half:])
	}
	attrs := map[string]string{"tenant_id": strconv.FormatInt(tenantID, 10), "count": strconv.Itoa(len(events))}
	start := time.Now()
	err = p.s.Send(ctx, data, attrs)
	p.metrics.Published(p.kind, time.Since(start), err)
	if err != nil {
		return errors.Join(errs.ErrUnavailable, err)
	}
	p.metrics.EventsAccepted(len(events))
	return nil
}

// Check reports whether the bus answers.
func (p *BusPublisher) Check(ctx context.Context) error { return p.s.Check(ctx) }
