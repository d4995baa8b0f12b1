package ingest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cohort-dev/cohort/internal/bus"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/ingest"
	"github.com/cohort-dev/cohort/internal/ingest/wire"
	"github.com/cohort-dev/cohort/internal/warehouse"
)

// startPubSub starts pstest with the events topic and the loader's subscription, and a publisher
// on it; everything stops when the test ends.
func startPubSub(t *testing.T) (*bus.EmbeddedPubSub, *ingest.BusPublisher) {
	t.Helper()
	ctx := context.Background()
	emb, opts, err := bus.StartEmbeddedPubSub()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emb.Close() })
	b, err := bus.OpenPubSub(ctx, bus.PubSubConfig{Project: "cohort-test", Topic: "events", Subscription: "events-loader", ClientOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	if err := b.EnsureTopology(ctx); err != nil {
		t.Fatal(err)
	}
	return emb, ingest.NewBusPublisher(b)
}

func tenantEvents(tenant int64, prefix string, n int) []warehouse.Event {
	out := make([]warehouse.Event, n)
	for i := range out {
		out[i] = whEvent(tenant, fmt.Sprintf("%s-%d", prefix, i), fmt.Sprintf("user-%d", i%13), "page_view", recv, recv, fmt.Sprintf(`{"i":%d}`, i))
	}
	return out
}

// The publisher reports a bus failure as unavailable, so the API answers 503 and nothing is lost
// silently.
func TestPubSubPublisherUnavailable(t *testing.T) {
	emb, pub := startPubSub(t)
	ctx := context.Background()
	if err := pub.Check(ctx); err != nil {
		t.Fatalf("Check on a healthy bus: %v", err)
	}
	if err := pub.Publish(ctx, 1, tenantEvents(1, "ok", 2)); err != nil {
		t.Fatalf("Publish on a healthy bus: %v", err)
	}
	// The next publish RPC fails with a status the client does not retry.
	srv := emb.Server()
	srv.SetAutoPublishResponse(false)
	srv.AddPublishResponse(nil, status.Error(codes.InvalidArgument, "injected failure"))
	err := pub.Publish(ctx, 1, tenantEvents(1, "x", 1))
	srv.SetAutoPublishResponse(true)
	if !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("Publish = %v, want errs.ErrUnavailable", err)
	}
	if err := pub.Publish(ctx, 1, tenantEvents(1, "again", 1)); err != nil {
		t.Fatalf("Publish after the failure: %v", err)
	}
	// The message carries the events, the version and the tenant.
	msgs := srv.Messages()
	if len(msgs) != 2 {
		t.Fatalf("%d messages on the topic, want 2", len(msgs))
	}
	var m wire.Message
	if err := json.Unmarshal(msgs[0].Data, &m); err != nil {
		t.Fatal(err)
	}
	if m.V != wire.MessageVersion || m.TenantID != 1 || len(m.Events) != 2 || m.Events[1].EventID != "ok-1" || string(m.Events[1].Payload) != `{"i":1}` {
		t.Errorf("message = %+v", m)
	}
	if msgs[0].Attributes["tenant_id"] != "1" || msgs[0].Attributes["count"] != "2" {
		t.Errorf("attributes = %v", msgs[0].Attributes)
	}
}

// A full stream refuses the publish (discard new): the API answers 503 and the client keeps its
// events, instead of the stream dropping events it had accepted. A stopped server is a 503 too,
// within the publish timeout.
func TestNATSPublisherUnavailable(t *testing.T) {
	srv, err := bus.StartEmbeddedNATS(bus.EmbeddedNATSOptions{Dir: t.TempDir(), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			srv.Shutdown()
		}
	})
	b, err := bus.OpenNATS(context.Background(), bus.NATSConfig{URL: srv.ClientURL(), Manage: true, MaxBytes: 64 << 10}, discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	if err := b.EnsureTopology(context.Background()); err != nil {
		t.Fatal(err)
	}
	pub := ingest.NewBusPublisher(b)
	ctx := context.Background()
	if err := pub.Check(ctx); err != nil {
		t.Fatalf("Check on a healthy bus: %v", err)
	}
	var full error
	for i := 0; i < 100 && full == nil; i++ {
		full = pub.Publish(ctx, 1, tenantEvents(1, fmt.Sprintf("f%d", i), 50))
	}
	if !errors.Is(full, errs.ErrUnavailable) {
		t.Fatalf("publishing into a full stream = %v, want errs.ErrUnavailable", full)
	}

	srv.Shutdown()
	stopped = true
	start := time.Now()
	err = pub.Publish(ctx, 1, tenantEvents(1, "down", 1))
	if !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("publishing with the server down = %v, want errs.ErrUnavailable", err)
	}
	if d := time.Since(start); d > ingest.PublishTimeout+2*time.Second {
		t.Fatalf("publish with the server down took %v", d)
	}
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := pub.Check(cctx); err == nil {
		t.Fatal("Check with the server down = nil")
	}
}
