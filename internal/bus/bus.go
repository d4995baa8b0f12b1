// Package bus is the event bus: Google Cloud Pub/Sub in production, and pstest, the official
// in-process Pub/Sub server of cloud.google.com/go/pubsub, as the embedded default. Both are driven
// by the same real client library, so ack deadlines, redelivery and ordering behave alike.
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

// Config names the topic and subscription.
type Config struct {
	Project      string
	Topic        string // id, e.g. "cohort-events"
	Subscription string // id, e.g. "cohort-events-loader"
	// AckDeadline of the subscription when EnsureTopology creates it.
	AckDeadline time.Duration
	// ClientOptions, e.g. the embedded server's endpoint.
	ClientOptions []option.ClientOption
}

// Bus is a connected Pub/Sub client.
type Bus struct {
	cfg    Config
	client *pubsub.Client
}

// Open connects the client.
func Open(ctx context.Context, cfg Config) (*Bus, error) {
	if cfg.Project == "" || cfg.Topic == "" {
		return nil, errors.New("pubsub: project and topic are required")
	}
	c, err := pubsub.NewClient(ctx, cfg.Project, cfg.ClientOptions...)
	if err != nil {
		return nil, fmt.Errorf("pubsub client: %w", err)
	}
	return &Bus{cfg: cfg, client: c}, nil
}

// Client exposes the underlying client to the publisher and subscriber of the ingestion path.
func (b *Bus) Client() *pubsub.Client { return b.client }

func (b *Bus) topicName() string { return "projects/" + b.cfg.Project + "/topics/" + b.cfg.Topic }
func (b *Bus) subName() string {
	return "projects/" + b.cfg.Project + "/subscriptions/" + b.cfg.Subscription
}

// EnsureTopology creates the topic and (when configured) the subscription if they are missing.
// Production normally provisions them with infrastructure code; dev and tests call this.
func (b *Bus) EnsureTopology(ctx context.Context) error {
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

// Check reports whether the topic is reachable (health checks).
func (b *Bus) Check(ctx context.Context) error {
	if _, err := b.client.TopicAdminClient.GetTopic(ctx, &pubsubpb.GetTopicRequest{Topic: b.topicName()}); err != nil {
		return fmt.Errorf("pubsub topic %s: %w", b.cfg.Topic, err)
	}
	return nil
}

// Close releases the client.
func (b *Bus) Close() error { return b.client.Close() }

// Embedded is an in-process pstest server.
type Embedded struct {
	srv  *pstest.Server
	conn *grpc.ClientConn
}

// StartEmbedded starts pstest on a loopback port and returns it with the client options that
// point a client at it.
func StartEmbedded() (*Embedded, []option.ClientOption, error) {
	srv := pstest.NewServerWithAddress("127.0.0.1:0")
	conn, err := grpc.NewClient(srv.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		_ = srv.Close()
		return nil, nil, fmt.Errorf("dial pstest: %w", err)
	}
	return &Embedded{srv: srv, conn: conn}, []option.ClientOption{option.WithGRPCConn(conn)}, nil
}

// Addr is the server's address.
func (e *Embedded) Addr() string { return e.srv.Addr }

// Server exposes the fake for tests that inject publish failures.
func (e *Embedded) Server() *pstest.Server { return e.srv }

// Close stops the server.
func (e *Embedded) Close() error {
	_ = e.conn.Close()
	return e.srv.Close()
}
