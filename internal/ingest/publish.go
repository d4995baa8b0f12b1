package ingest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"cloud.google.com/go/pubsub/v2"

	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/warehouse"
)

// Message is what one Pub/Sub message carries: the accepted events of one request. One message per
// request keeps publish cost flat in the batch size (Pub/Sub caps a message at 10 MB; a batch
// body is at most 4 MB).
type Message struct {
	V        int               `json:"v"`
	TenantID int64             `json:"tenant_id"`
	Events   []warehouse.Event `json:"events"`
}

// MessageVersion is the current Message format.
const MessageVersion = 1

// PublishTimeout bounds how long a request waits for Pub/Sub to acknowledge its events.
const PublishTimeout = 10 * time.Second

// Publisher hands accepted events to the bus and returns once the bus has acknowledged them.
// Every event's payload is a valid JSON object: Service sees to it (Decode checks what clients
// send, PublishEvents what webhooks build), so a publisher need not check it again.
type Publisher interface {
	Publish(ctx context.Context, tenantID int64, events []warehouse.Event) error
	Check(ctx context.Context) error
}

// PubSubPublisher publishes to a Pub/Sub topic.
type PubSubPublisher struct {
	pub   *pubsub.Publisher
	check func(context.Context) error
}

// NewPubSubPublisher publishes to topic through client; check is the bus health probe.
func NewPubSubPublisher(client *pubsub.Client, topic string, check func(context.Context) error) *PubSubPublisher {
	p := client.Publisher(topic)
	// Small messages (single events, webhooks) from concurrent requests share publish RPCs and
	// wait at most 2 ms for company. A full batch's message (the benchmark's 500 events: over
	// 100 kB) fills a bundle by itself and goes out at once: waiting for others only added
	// latency (with 2 clients, those 2 ms halved the batch endpoint's throughput).
	p.PublishSettings.DelayThreshold = 2 * time.Millisecond
	p.PublishSettings.CountThreshold = 100
	p.PublishSettings.ByteThreshold = 64 << 10
	p.PublishSettings.Timeout = 15 * time.Second
	return &PubSubPublisher{pub: p, check: check}
}

// Publish encodes the events as one message and waits for the server's ack.
func (p *PubSubPublisher) Publish(ctx context.Context, tenantID int64, events []warehouse.Event) error {
	data, err := encodeMessage(tenantID, events)
	if err != nil {
		return fmt.Errorf("encode message: %w", err)
	}
	// A bus that does not answer must not hold requests (and their clients) forever: 503 instead.
	ctx, cancel := context.WithTimeout(ctx, PublishTimeout)
	defer cancel()
	res := p.pub.Publish(ctx, &pubsub.Message{
		Data:       data,
		Attributes: map[string]string{"tenant_id": strconv.FormatInt(tenantID, 10), "count": strconv.Itoa(len(events))},
	})
	if _, err := res.Get(ctx); err != nil {
		return errors.Join(errs.ErrUnavailable, fmt.Errorf("publish to pubsub: %w", err))
	}
	return nil
}

// Check reports whether the topic answers.
func (p *PubSubPublisher) Check(ctx context.Context) error { return p.check(ctx) }

// Stop flushes pending publishes.
func (p *PubSubPublisher) Stop() { p.pub.Stop() }
