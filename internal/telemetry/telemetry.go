// Package telemetry sets up OpenTelemetry tracing: W3C trace context and baggage propagation
// always, and a TracerProvider that exports spans over OTLP/gRPC when an endpoint is configured
// (config.TelemetryConfig, the standard OTEL_* variables). Without one nothing is exported and
// the global provider stays OpenTelemetry's no-op default, so dev needs no collector.
//
// OpenTelemetry's instrumentation (the Pub/Sub client, Temporal's interceptor) and Cohort's own
// (api's Gin middleware, the pgx tracer here, the NATS bus) take the process-wide provider and
// propagator, so Setup, called once by main, is the one place that sets them.
package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"

	"github.com/cohort-dev/cohort/internal/config"
)

// Service describes the process in its spans' resource.
type Service struct {
	Version string // service.version
	Role    string // cohort.role: serve, worker, dev
	// Logger receives OpenTelemetry's own errors (an unreachable collector); nil: discarded.
	Logger *slog.Logger
}

// Setup installs the W3C tracecontext + baggage propagators and, when cfg enables tracing, a
// TracerProvider that batches spans to the OTLP/gRPC endpoint. The returned shutdown flushes
// what is buffered and stops the exporter (a no-op when tracing is off).
func Setup(ctx context.Context, cfg config.TelemetryConfig, svc Service) (shutdown func(context.Context) error, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	otel.SetTextMapPropagator(Propagator())
	if !cfg.TracingEnabled() {
		return func(context.Context) error { return nil }, nil
	}
	sampler, err := Sampler(cfg)
	if err != nil {
		return nil, err
	}
	logger := svc.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn("opentelemetry", "error", err)
	}))
	attrs := []attribute.KeyValue{attribute.String("service.name", cfg.ServiceName)}
	if svc.Version != "" {
		attrs = append(attrs, attribute.String("service.version", svc.Version))
	}
	if svc.Role != "" {
		attrs = append(attrs, attribute.String("cohort.role", svc.Role))
	}
	// Later detectors win: OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME over the defaults.
	res, err := resource.New(ctx,
		resource.WithAttributes(attrs...),
		resource.WithFromEnv(),
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		resource.WithProcessPID(),
	)
	if err != nil {
		return nil, fmt.Errorf("tracing resource: %w", err)
	}
	// The exporter reads the other OTEL_EXPORTER_OTLP_* variables (headers, certificate,
	// timeout, compression) itself; the URL's scheme picks plaintext (http) or TLS (https).
	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(cfg.Endpoint))
	if err != nil {
		return nil, fmt.Errorf("otlp trace exporter: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sampler),
	)
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}

// Propagator is W3C trace context plus W3C baggage.
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// Sampler is the sampler OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG name, with the SDK's
// meaning and default (parentbased_always_on; a ratio of 1).
func Sampler(cfg config.TelemetryConfig) (sdktrace.Sampler, error) {
	ratio := 1.0
	if cfg.SamplerArg != "" {
		r, err := strconv.ParseFloat(cfg.SamplerArg, 64)
		if err != nil || r < 0 || r > 1 {
			return nil, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG must be a ratio between 0 and 1, got %q", cfg.SamplerArg)
		}
		ratio = r
	}
	switch cfg.Sampler {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio)), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(ratio), nil
	}
	return nil, fmt.Errorf("OTEL_TRACES_SAMPLER %q is not supported", cfg.Sampler)
}

// Tracer is a tracer that starts every span on the global provider current at that moment, for
// instrumentation that keeps a tracer from its construction (Temporal's interceptor): it follows
// Setup (and a test's recorder) whenever they run.
func Tracer(name string) trace.Tracer { return globalTracer{name: name} }

type globalTracer struct {
	embedded.Tracer
	name string
}

func (g globalTracer) Start(ctx context.Context, spanName string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	return otel.GetTracerProvider().Tracer(g.name).Start(ctx, spanName, opts...)
}
