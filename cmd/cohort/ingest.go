package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/api/option"

	"github.com/cohort-dev/cohort/api"
	"github.com/cohort-dev/cohort/internal/bus"
	"github.com/cohort-dev/cohort/internal/identity"
	"github.com/cohort-dev/cohort/internal/ingest"
	"github.com/cohort-dev/cohort/internal/ingest/load"
	"github.com/cohort-dev/cohort/internal/ingest/segmentcompat"
	"github.com/cohort-dev/cohort/internal/warehouse"
	whpg "github.com/cohort-dev/cohort/internal/warehouse/postgres"
	"github.com/cohort-dev/cohort/worker"
)

// eventBus is what the ingestion path needs of a bus adapter.
type eventBus interface {
	bus.Sender
	bus.Receiver
	EnsureTopology(ctx context.Context) error
	Close() error
}

// embeddedBus points the bus at a server running in this process (cohort dev, tests).
type embeddedBus struct {
	pubsub []option.ClientOption // pstest
	nats   *bus.EmbeddedNATS     // in-process connection to the embedded NATS server
}

// ingestion holds the event path's parts: the bus, the warehouse (and how the loader stores events
// in it), the error log.
type ingestion struct {
	bus       eventBus
	warehouse warehouse.Writer
	store     load.EventStore
	errlog    *ingest.ErrorLog
	publisher *ingest.BusPublisher
	// closeBus closes the bus client once (flushing pending acks); cohort dev calls it before it
	// stops the embedded bus server, which a flush after the server is gone would wait on.
	closeBus func()
}

// openIngestion connects the bus (emb points it at an embedded server in dev) and the warehouse.
func (c *core) openIngestion(ctx context.Context, emb embeddedBus) (*ingestion, error) {
	b, err := c.openBus(ctx, emb)
	if err != nil {
		return nil, err
	}
	closeBus := sync.OnceFunc(func() { _ = b.Close() })
	c.closers = append(c.closers, closeBus)
	// An embedded bus is ours to set up; so is a NATS stream that does not exist yet (with
	// NATS_MANAGE_STREAM, also one that does). Pub/Sub topics are provisioned with the project.
	if emb.pubsub != nil || emb.nats != nil || c.cfg.EventBus() == "nats" {
		if err := b.EnsureTopology(ctx); err != nil {
			return nil, err
		}
	}
	wh, store, err := c.openWarehouse(ctx)
	if err != nil {
		return nil, err
	}
	in := &ingestion{bus: b, warehouse: wh, store: store, errlog: ingest.NewErrorLog(c.db.Pool, c.log, time.Now), closeBus: closeBus}
	c.closers = append(c.closers, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = in.errlog.Close(ctx)
	})
	in.publisher = ingest.NewBusPublisher(b, ingest.WithMetrics(c.metrics))
	return in, nil
}

func (c *core) openBus(ctx context.Context, emb embeddedBus) (eventBus, error) {
	switch c.cfg.EventBus() {
	case "nats":
		n := c.cfg.NATS
		nc := bus.NATSConfig{
			URL: n.URL, CredsFile: n.CredsFile, Token: n.Token, CAFile: n.CAFile,
			Stream: n.Stream, Subject: n.Subject, Consumer: n.Consumer, Manage: n.ManageStream,
			MaxAge: n.MaxAge, MaxBytes: n.MaxBytes, Replicas: n.Replicas, AckWait: n.AckWait,
		}
		if emb.nats != nil {
			nc.InProcess, nc.Manage = emb.nats, true
		}
		return bus.OpenNATS(ctx, nc, c.log)
	case "pubsub":
		return bus.OpenPubSub(ctx, bus.PubSubConfig{
			Project: c.cfg.PubSub.Project, Topic: c.cfg.PubSub.Topic, Subscription: c.cfg.PubSub.Subscription,
			ClientOptions: emb.pubsub,
		})
	}
	return nil, fmt.Errorf("unknown event bus %q", c.cfg.EventBus())
}

// openWarehouse opens the configured warehouse, and says how the loader stores events in it: the
// embedded one within the loader's transaction, BigQuery behind the Postgres ledger of event ids.
func (c *core) openWarehouse(ctx context.Context) (warehouse.Writer, load.EventStore, error) {
	switch c.cfg.Warehouse {
	case "postgres":
		w := whpg.New(c.db.Pool)
		return w, w, nil
	case "bigquery":
		w, err := openBigQuery(ctx, c)
		if err != nil {
			return nil, nil, err
		}
		return w, whpg.NewLedger(w), nil
	}
	return nil, nil, fmt.Errorf("unknown warehouse %q", c.cfg.Warehouse)
}

// ingestAPI builds the ingestion endpoints' dependencies.
func (c *core) ingestAPI(in *ingestion) *api.IngestionDeps {
	svc := ingest.NewService(in.publisher, in.errlog, time.Now, ingest.WithMetrics(c.metrics))
	secrets := func(ctx context.Context, slug string) (int64, []byte, error) {
		t, secret, err := c.tenants.WebhookSecret(ctx, slug)
		return t.ID, secret, err
	}
	return &api.IngestionDeps{
		Service: svc,
		Stats:   load.NewStats(c.db.Pool, time.Now),
		Shopify: ingest.NewShopifyReceiver(secrets, svc, time.Now),
		Segment: segmentcompat.NewService(svc, time.Now),
		Health: []api.ReadyCheck{
			// The key is pubsub_topic (api/openapi.yaml, health) whichever bus runs: the bus takes events.
			{Name: "pubsub_topic", Check: in.bus.Check},
			{Name: "worker", Check: func(ctx context.Context) error { return load.LoaderAlive(ctx, c.db.Pool, time.Now()) }},
			{Name: in.warehouse.Name(), Check: in.warehouse.Check},
		},
	}
}

// loader is the worker role's event loader.
func (c *core) loader(in *ingestion) (worker.Consumer, error) {
	if c.cfg.EventBus() == "pubsub" && c.cfg.PubSub.Subscription == "" {
		return nil, errors.New("PUBSUB_SUBSCRIPTION is required to run the event loader")
	}
	sink := load.NewSink(c.db.Pool, in.store,
		load.WithIdentity(identity.New(identity.Config{MaxLinkedIDs: c.cfg.IdentityMaxAnonymousIDs}), in.errlog))
	return load.NewLoader(in.bus, sink, c.db.Pool, in.errlog, c.log, load.LoaderConfig{
		Flushers: c.cfg.LoaderFlushers, Streams: c.cfg.LoaderStreams, Metrics: c.metrics}), nil
}
