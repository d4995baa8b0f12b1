package bus

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/cohort-dev/cohort/internal/testenv"
)

func spanNamed(t *testing.T, spans []sdktrace.ReadOnlySpan, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	for _, s := range spans {
		if s.Name() == name {
			return s
		}
	}
	var names []string
	for _, s := range spans {
		names = append(names, s.Name())
	}
	t.Fatalf("no span %q among %v", name, names)
	return nil
}

func attrOf(s sdktrace.ReadOnlySpan, key attribute.Key) string {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

// receiveOne runs r.Receive until one message arrives and returns it unsettled, with a function
// to call once it is settled: it waits for Receive to return (Pub/Sub's waits for what its
// handler holds).
func receiveOne(t *testing.T, r Receiver) (*Message, func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	got := make(chan *Message, 1)
	done := make(chan error, 1)
	go func() {
		done <- r.Receive(ctx, ReceiveSettings{MaxOutstandingMessages: 10}, func(m *Message) {
			select {
			case got <- m:
				cancel()
			default:
				m.Nack()
			}
		})
	}()
	wait := func() {
		t.Helper()
		defer cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("receive: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("Receive did not return after its context ended")
		}
	}
	select {
	case m := <-got:
		return m, wait
	case err := <-done:
		cancel()
		t.Fatalf("receive ended without a message: %v", err)
	}
	return nil, nil
}

// A NATS publish carries the publisher's trace context (and baggage) in the message headers; the
// delivery's span continues that trace under the publish span, is the message's Context, and
// ends when the message is acked.
func TestNATSPropagatesTraceContext(t *testing.T) {
	rec := testenv.RecordSpans(t)
	srv, err := StartEmbeddedNATS(EmbeddedNATSOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := OpenNATS(ctx, NATSConfig{InProcess: srv, Manage: true}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	if err := n.EnsureTopology(ctx); err != nil {
		t.Fatal(err)
	}

	member, _ := baggage.NewMember("cohort.tenant", "7")
	bag, _ := baggage.New(member)
	pctx, parent := otel.Tracer("test").Start(baggage.ContextWithBaggage(ctx, bag), "POST /api/ingestion/batch/")
	if err := n.Send(pctx, []byte(`{"events":[]}`), map[string]string{"tenant_id": "7"}); err != nil {
		t.Fatalf("send: %v", err)
	}
	parent.End()

	// The trace context is in the stored message's headers under the W3C names.
	st, err := n.js.Stream(ctx, n.cfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := st.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if raw.Header.Get("traceparent") == "" || raw.Header.Get("tenant_id") != "7" {
		t.Fatalf("stored headers %v: want traceparent beside the attributes", raw.Header)
	}

	m, wait := receiveOne(t, n)
	sc := trace.SpanContextFromContext(m.Context())
	if sc.TraceID() != parent.SpanContext().TraceID() {
		t.Fatalf("delivery trace %s, want the publisher's %s", sc.TraceID(), parent.SpanContext().TraceID())
	}
	if got := baggage.FromContext(m.Context()).Member("cohort.tenant").Value(); got != "7" {
		t.Errorf("baggage cohort.tenant = %q, want 7", got)
	}
	for _, s := range rec.Ended() {
		if s.Name() == "process cohort.events" {
			t.Fatal("the delivery span ended before the message was settled")
		}
	}
	m.Ack()
	wait()

	spans := rec.Ended()
	send := spanNamed(t, spans, "send cohort.events")
	proc := spanNamed(t, spans, "process cohort.events")
	if send.Parent().SpanID() != parent.SpanContext().SpanID() || send.SpanKind() != trace.SpanKindProducer {
		t.Errorf("send span: parent %s kind %v, want the request span %s, producer", send.Parent().SpanID(), send.SpanKind(), parent.SpanContext().SpanID())
	}
	if proc.Parent().SpanID() != send.SpanContext().SpanID() || !proc.Parent().IsRemote() || proc.SpanKind() != trace.SpanKindConsumer {
		t.Errorf("process span: parent %s (remote %v) kind %v, want the send span %s from the headers, consumer",
			proc.Parent().SpanID(), proc.Parent().IsRemote(), proc.SpanKind(), send.SpanContext().SpanID())
	}
	if !proc.SpanContext().Equal(sc) {
		t.Errorf("Message.Context span %s is not the process span %s", sc.SpanID(), proc.SpanContext().SpanID())
	}
	for key, want := range map[attribute.Key]string{
		"messaging.system": "nats", "messaging.destination.name": "cohort.events",
		"messaging.message.id": "1", "messaging.message.delivery_count": "1", "cohort.bus.outcome": "ack",
	} {
		if got := attrOf(proc, key); got != want {
			t.Errorf("process span %s = %q, want %q", key, got, want)
		}
	}

	// A message without trace headers (another publisher) starts a trace of its own at delivery.
	if _, err := n.js.Publish(ctx, n.cfg.Subject, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	m, wait = receiveOne(t, n)
	m.Nack()
	wait()
	last := rec.Ended()[len(rec.Ended())-1]
	if last.Name() != "process cohort.events" || last.Parent().IsValid() || attrOf(last, "cohort.bus.outcome") != "nack" {
		t.Errorf("untraced delivery: span %q parent %v outcome %q", last.Name(), last.Parent(), attrOf(last, "cohort.bus.outcome"))
	}
}

// The Pub/Sub client's own tracing is on: a message received carries the publisher's trace.
func TestPubSubPropagatesTraceContext(t *testing.T) {
	testenv.RecordSpans(t)
	emb, opts, err := StartEmbeddedPubSub()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ps, err := OpenPubSub(ctx, PubSubConfig{Project: "p", Topic: "events", Subscription: "loader", ClientOptions: opts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ps.Close() })
	if err := ps.EnsureTopology(ctx); err != nil {
		t.Fatal(err)
	}
	pctx, parent := otel.Tracer("test").Start(ctx, "POST /api/ingestion/batch/")
	if err := ps.Send(pctx, []byte(`{"events":[]}`), map[string]string{"tenant_id": "7"}); err != nil {
		t.Fatalf("send: %v", err)
	}
	parent.End()
	m, wait := receiveOne(t, ps)
	defer wait()
	defer m.Ack()
	if got := trace.SpanContextFromContext(m.Context()).TraceID(); got != parent.SpanContext().TraceID() {
		t.Fatalf("delivery trace %s, want the publisher's %s", got, parent.SpanContext().TraceID())
	}
	if err := m.Context().Err(); err != nil {
		t.Errorf("the message's context ended with Receive: %v", err)
	}
}
