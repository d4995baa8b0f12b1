package bus

import (
	"context"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// tracerName is the instrumentation scope of the NATS bus's spans (Pub/Sub's client traces
// itself).
const tracerName = "github.com/cohort-dev/cohort/internal/bus"

// natsHeaderCarrier puts the trace context (traceparent, tracestate, baggage) in a NATS
// message's headers, whose keys are case-sensitive: written and read as the W3C names.
type natsHeaderCarrier nats.Header

var _ propagation.TextMapCarrier = natsHeaderCarrier{}

func (c natsHeaderCarrier) Get(key string) string { return nats.Header(c).Get(key) }
func (c natsHeaderCarrier) Set(key, value string) { nats.Header(c).Set(key, value) }
func (c natsHeaderCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

func (n *NATS) spanAttrs(op string, size int) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("messaging.system", "nats"),
		attribute.String("messaging.operation.type", op),
		attribute.String("messaging.destination.name", n.cfg.Subject),
		attribute.String("messaging.nats.stream", n.cfg.Stream),
		attribute.Int("messaging.message.body.size", size),
	}
}

// startPublish starts the producer span of a publish and writes its context into msg's headers.
func (n *NATS) startPublish(ctx context.Context, msg *nats.Msg) (context.Context, trace.Span) {
	ctx, span := otel.Tracer(tracerName).Start(ctx, "send "+n.cfg.Subject,
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(n.spanAttrs("send", len(msg.Data))...))
	otel.GetTextMapPropagator().Inject(ctx, natsHeaderCarrier(msg.Header))
	return ctx, span
}

// startDelivery starts the consumer span of a delivery as a child of the span that published
// the message (from its headers) and sets it on m; the span ends when m is acked or nacked.
func (n *NATS) startDelivery(m *Message, h nats.Header) {
	ctx := otel.GetTextMapPropagator().Extract(context.Background(), natsHeaderCarrier(h))
	attrs := append(n.spanAttrs("process", len(m.Data)),
		attribute.String("messaging.consumer.group.name", n.cfg.Consumer),
		attribute.String("messaging.message.id", m.ID),
		attribute.Int("messaging.message.delivery_count", m.Deliveries))
	ctx, span := otel.Tracer(tracerName).Start(ctx, "process "+n.cfg.Subject,
		trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...))
	m.ctx = ctx
	m.finish = func(outcome string) {
		span.SetAttributes(attribute.String("cohort.bus.outcome", outcome))
		span.End()
	}
}

// endSpan ends a span with err as its status.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
