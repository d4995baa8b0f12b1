package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// PubSubConfig names the topic and subscription.
type PubSubConfig struct {
	Project      string
	Topic        string // id, e.g. "cohort-events"
	Subscription string // id, e.g. "cohort-events-loader"
	// AckDeadline of the subscription when EnsureTopology creates it.
	AckDeadline time.Duration
	// ClientOptions, e.g. the embedded server's endpoint.
	ClientOptions []option.ClientOption
}

// pubSubMaxMessageBytes is Pub/Sub's limit on a message's data.
const pubSubMaxMessageBytes = 10_000_000

// PubSub is a connected Pub/Sub client: a Sender on the topic and a Receiver on the subscription.
type PubSub struct {
	cfg    PubSubConfig
	client *pubsub.Client
	pub    *pubsub.Publisher
}

// OpenPubSub connects the client.
func OpenPubSub(ctx context.Context, cfg PubSubConfig) (*PubSub, error) {
	if cfg.Project == "" || cfg.Topic == "" {
		return nil, errors.New("pubsub: project and topic are required")
	}
	// The client's own OpenTelemetry spans (publish, subscribe, process), on the global provider
	// (no-op unless internal/telemetry set one up); it carries the trace context in the
	// messages' googclient_ attributes.
	c, err := pubsub.NewClientWithConfig(ctx, cfg.Project, &pubsub.ClientConfig{EnableOpenTelemetryTracing: true}, cfg.ClientOptions...)
	if err != nil {
		return nil, fmt.Errorf("pubsub client: %w", err)
	}
	p := c.Publisher(cfg.Topic)
	// Small messages (single events, webhooks) from concurrent requests share publish RPCs and
	// wait a little for company; a full batch's message fills a bundle by itself and goes out at
	// once, since waiting for others only adds latency.
	p.PublishSettings.DelayThreshold = 2 * time.Millisecond
	p.PublishSettings.CountThreshold = 100
	p.PublishSettings.ByteThreshold = 64 << 10
	p.PublishSettings.Timeout = 15 * time.Second
	return &PubSub{cfg: cfg, client: c, pub: p}, nil
}

// Client exposes the underlying client (tests publish raw messages through it).
func (b *PubSub) Client() *pubsub.Client { return b.client }

func (b *PubSub) topicName() string { return "projects/" + b.cfg.Project + "/topics/" + b.cfg.Topic }
func (b *PubSub) subName() string {
	return "projects/" + b.cfg.Project + "/subscriptions/" + b.cfg.Subscription
}

// EnsureTopology creates the topic and (when configured) the subscription if they are missing.
// Production normally provisions them with infrastructure code; dev and tests call this.
func (b *PubSub) EnsureTopology(ctx context.Context) error {
	_, err := b.client.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: b.topicName()})
	if err != nil && status.Code(err) != codes.AlreadyExists {
		return fmt.Errorf("create topic %s: %w", b.cfg.Topic, err)
	}
	if b.cfg.Subscription == "" {
		return nil
	}
	ack := b.cfg.AckDeadline
	if ack == 0 {
		ack = 60 * time.Second
	}
	_, err = b.client.SubscriptionAdminClient.CreateSubscription(ctx, &pubsubpb.Subscription{
		Name:               b.subName(),
		Topic:              b.topicName(),
		AckDeadlineSeconds: int32(ack / time.Second),
	})
	if err != nil && status.Code(err) != codes.AlreadyExists {
		return fmt.Errorf("create subscription %s: %w", b.cfg.Subscription, err)
	}
	return nil
}

// Send publishes one message and waits for the server's ack.
func (b *PubSub) Send(ctx context.Context, data []byte, attrs map[string]string) error {
	res := b.pub.Publish(ctx, &pubsub.Message{Data: data, Attributes: attrs})
	if _, err := res.Get(ctx); err != nil {
		return fmt.Errorf("publish to pubsub: %w", err)
	}
	return nil
}

// Kind names the bus in metrics.
func (b *PubSub) Kind() string { return "pubsub" }

// MaxMessageBytes is Pub/Sub's message size limit.
func (b *PubSub) MaxMessageBytes() int { return pubSubMaxMessageBytes }

// Receive pulls from the subscription on s.Streams StreamingPull streams until ctx ends. The
// client extends the ack deadline of what the handler holds.
func (b *PubSub) Receive(ctx context.Context, s ReceiveSettings, h Handler) error {
	if b.cfg.Subscription == "" {
		return errors.New("pubsub: no subscription configured")
	}
	sub := b.client.Subscriber(b.cfg.Subscription)
	if s.Streams > 0 {
		sub.ReceiveSettings.NumGoroutines = s.Streams
	}
	if s.MaxOutstandingMessages > 0 {
		sub.ReceiveSettings.MaxOutstandingMessages = s.MaxOutstandingMessages
	}
	if s.MaxOutstandingBytes > 0 {
		sub.ReceiveSettings.MaxOutstandingBytes = s.MaxOutstandingBytes
	}
	return sub.Receive(ctx, func(mctx context.Context, m *pubsub.Message) {
		deliveries := 0
		if m.DeliveryAttempt != nil {
			deliveries = *m.DeliveryAttempt
		}
		// mctx holds the client's process span (ended by Ack or Nack), under the publisher's
		// trace; the message outlives the callback, and Receive's cancellation is not its.
		h(&Message{ID: m.ID, Data: m.Data, PublishTime: m.PublishTime, Deliveries: deliveries, ack: m.Ack, nack: m.Nack,
			ctx: context.WithoutCancel(mctx)})
	})
}

// Check reports whether the topic is reachable (health checks).
func (b *PubSub) Check(ctx context.Context) error {
	if _, err := b.client.TopicAdminClient.GetTopic(ctx, &pubsubpb.GetTopicRequest{Topic: b.topicName()}); err != nil {
		return fmt.Errorf("pubsub topic %s: %w", b.cfg.Topic, err)
	}
	return nil
}

// Close flushes pending publishes and releases the client.
func (b *PubSub) Close() error {
	b.pub.Stop()
	return b.client.Close()
}

// EmbeddedPubSub is an in-process pstest server. It keeps every message published to it in
// memory for its lifetime, so it is for tests, not for `cohort dev`.
type EmbeddedPubSub struct {
	srv  *pstest.Server
	conn *grpc.ClientConn
}

// StartEmbeddedPubSub starts pstest on a loopback port and returns it with the client options
// that point a client at it.
func StartEmbeddedPubSub() (*EmbeddedPubSub, []option.ClientOption, error) {
	srv := pstest.NewServerWithAddress("127.0.0.1:0")
	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		_ = srv.Close()
		return nil, nil, fmt.Errorf("dial pstest: %w", err)
	}
	return &EmbeddedPubSub{srv: srv, conn: conn}, []option.ClientOption{option.WithGRPCConn(conn)}, nil
}

// Addr is the server's address.
func (e *EmbeddedPubSub) Addr() string { return e.srv.Addr }

// Server exposes the fake for tests that inject publish failures.
func (e *EmbeddedPubSub) Server() *pstest.Server { return e.srv }

// Close stops the server.
func (e *EmbeddedPubSub) Close() error {
	_ = e.conn.Close()
	return e.srv.Close()
}
