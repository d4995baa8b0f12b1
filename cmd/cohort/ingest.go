package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/api/option"

	"github.com/cohort-dev/cohort/api"
	"github.com/cohort-dev/cohort/internal/bus"
	"github.com/cohort-dev/cohort/internal/ingest"
	"github.com/cohort-dev/cohort/internal/warehouse"
	whpg "github.com/cohort-dev/cohort/internal/warehouse/postgres"
	"github.com/cohort-dev/cohort/worker"
)

// ingestion holds the event path's parts: the bus, the warehouse, the error log.
type ingestion struct {
	bus       *bus.Bus
	warehouse warehouse.Writer
	errlog    *ingest.ErrorLog
	publisher *ingest.PubSubPublisher
}

// openIngestion connects the bus (busOpts point at the embedded server in dev) and the warehouse.
func (c *core) openIngestion(ctx context.Context, busOpts []option.ClientOption) (*ingestion, error) {
	b, err := bus.Open(ctx, bus.Config{
		Project: c.cfg.PubSub.Project, Topic: c.cfg.PubSub.Topic, Subscription: c.cfg.PubSub.Subscription,
		ClientOptions: busOpts,
	})
	if err != nil {
		return nil, err
	}
	c.closers = append(c.closers, func() { _ = b.Close() })
	wh, err := c.openWarehouse(ctx)
	if err != nil {
		return nil, err
	}
	in := &ingestion{bus: b, warehouse: wh, errlog: ingest.NewErrorLog(c.db.Pool, c.log, time.Now)}
	c.closers = append(c.closers, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = in.errlog.Close(ctx)
	})
	in.publisher = ingest.NewPubSubPublisher(b.Client(), c.cfg.PubSub.Topic, b.Check)
	c.closers = append(c.closers, in.publisher.Stop)
	return in, nil
}

func (c *core) openWarehouse(ctx context.Context) (warehouse.Writer, error) {
	switch c.cfg.Warehouse {
	case "postgres":
		return whpg.New(c.db.Pool), nil
	case "bigquery":
		return openBigQuery(ctx, c)
	}
	return nil, fmt.Errorf("unknown warehouse %q", c.cfg.Warehouse)
}

// ingestAPI builds the ingestion endpoints' dependencies.
func (c *core) ingestAPI(in *ingestion) *api.IngestionDeps {
	svc := ingest.NewService(in.publisher, in.errlog, time.Now)
	secrets := func(ctx context.Context, slug string) (int64, []byte, error) {
		t, secret, err := c.tenants.WebhookSecret(ctx, slug)
		return t.ID, secret, err
	}
	return &api.IngestionDeps{
		Service: svc,
		Stats:   ingest.NewStats(c.db.Pool, time.Now),
		Shopify: ingest.NewShopifyReceiver(secrets, svc, time.Now),
		Health: []api.ReadyCheck{
			{Name: "pubsub_topic", Check: in.bus.Check},
			{Name: "worker", Check: func(ctx context.Context) error { return ingest.LoaderAlive(ctx, c.db.Pool, time.Now()) }},
			{Name: in.warehouse.Name(), Check: in.warehouse.Check},
		},
	}
}

// loader is the worker role's event loader.
func (c *core) loader(in *ingestion) (worker.Consumer, error) {
	if c.cfg.PubSub.Subscription == "" {
		return nil, errors.New("PUBSUB_SUBSCRIPTION is required to run the event loader")
	}
	sink := ingest.NewSink(c.db.Pool, in.warehouse)
	sub := in.bus.Client().Subscriber(c.cfg.PubSub.Subscription)
	return ingest.NewLoader(sub, sink, c.db.Pool, in.errlog, c.log, ingest.LoaderConfig{
		Flushers: c.cfg.LoaderFlushers, Streams: c.cfg.LoaderStreams}), nil
}
