package telemetry_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/cohort-dev/cohort/internal/config"
	"github.com/cohort-dev/cohort/internal/telemetry"
	"github.com/cohort-dev/cohort/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// restoreGlobals puts the global provider and propagator back after the test.
func restoreGlobals(t *testing.T) {
	t.Helper()
	tp, prop := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	t.Cleanup(func() {
		otel.SetTracerProvider(tp)
		otel.SetTextMapPropagator(prop)
	})
}

func loadTelemetry(t *testing.T, env map[string]string) config.TelemetryConfig {
	t.Helper()
	cfg, err := config.Load(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Telemetry
}

// Off by default: no exporter, the global provider untouched, the W3C propagators installed.
func TestSetupOffByDefault(t *testing.T) {
	restoreGlobals(t)
	cfg := loadTelemetry(t, nil)
	if cfg.TracingEnabled() {
		t.Fatalf("tracing on without an endpoint: %+v", cfg)
	}
	before := otel.GetTracerProvider()
	shutdown, err := telemetry.Setup(context.Background(), cfg, telemetry.Service{})
	if err != nil {
		t.Fatal(err)
	}
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if otel.GetTracerProvider() != before {
		t.Error("Setup replaced the tracer provider with tracing off")
	}
	fields := otel.GetTextMapPropagator().Fields()
	for _, f := range []string{"traceparent", "tracestate", "baggage"} {
		found := false
		for _, g := range fields {
			found = found || g == f
		}
		if !found {
			t.Errorf("propagator fields %v lack %s", fields, f)
		}
	}
	// With an endpoint but OTEL_TRACES_EXPORTER=none or OTEL_SDK_DISABLED, still off.
	for _, env := range []map[string]string{
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_TRACES_EXPORTER": "none"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_SDK_DISABLED": "true"},
	} {
		if c := loadTelemetry(t, env); c.TracingEnabled() {
			t.Errorf("%v: tracing on", env)
		}
	}
}

// collector is an OTLP/gRPC trace receiver on loopback.
type collector struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	names []string
	attrs map[string]string // resource attributes of the last export
}

func (c *collector) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		c.attrs = map[string]string{}
		for _, kv := range rs.GetResource().GetAttributes() {
			c.attrs[kv.GetKey()] = kv.GetValue().GetStringValue()
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c.names = append(c.names, s.GetName())
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// With OTEL_EXPORTER_OTLP_ENDPOINT set, spans reach the collector over OTLP/gRPC with the
// service's resource, and shutdown flushes them.
func TestSetupExportsOverOTLP(t *testing.T) {
	restoreGlobals(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	col := &collector{}
	gs := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(gs, col)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)

	cfg := loadTelemetry(t, map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + lis.Addr().String(),
		"OTEL_SERVICE_NAME":           "cohort-api",
	})
	if !cfg.TracingEnabled() {
		t.Fatalf("tracing off with an endpoint: %+v", cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	shutdown, err := telemetry.Setup(ctx, cfg, telemetry.Service{Version: "v1.2.3", Role: "serve"})
	if err != nil {
		t.Fatal(err)
	}
	_, span := otel.Tracer("test").Start(ctx, "GET /api/segments/")
	span.End()
	if err := shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.names) != 1 || col.names[0] != "GET /api/segments/" {
		t.Fatalf("collector got spans %v", col.names)
	}
	for k, want := range map[string]string{"service.name": "cohort-api", "service.version": "v1.2.3", "cohort.role": "serve"} {
		if col.attrs[k] != want {
			t.Errorf("resource %s = %q, want %q (all: %v)", k, col.attrs[k], want, col.attrs)
		}
	}
}

func TestTelemetryConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		err  string // "" valid
	}{
		{"off", nil, ""},
		{"traces endpoint wins", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "bad", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://otel.example:4317"}, ""},
		{"endpoint without scheme", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4317"}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{"http protocol", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, "only grpc"},
		{"grpc protocol", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, ""},
		{"unknown exporter", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER"},
		{"unknown sampler", map[string]string{"OTEL_TRACES_SAMPLER": "jaeger_remote"}, "OTEL_TRACES_SAMPLER"},
		{"ratio out of range", map[string]string{"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "1.5"}, "OTEL_TRACES_SAMPLER_ARG"},
		{"ratio", map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := loadTelemetry(t, tc.env)
			err := cfg.Validate()
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one naming %s", err, tc.err)
			}
			if tc.err != "" {
				if _, serr := telemetry.Setup(context.Background(), cfg, telemetry.Service{}); serr == nil {
					t.Error("Setup accepted an invalid configuration")
				}
			}
		})
	}
}

// The sampler follows OTEL_TRACES_SAMPLER(_ARG) as the SDK defines them.
func TestSampler(t *testing.T) {
	sampledParent := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled, Remote: true}))
	for _, tc := range []struct {
		sampler, arg         string
		rootSampled, childOK bool
	}{
		{"", "", true, true},
		{"parentbased_always_on", "", true, true},
		{"parentbased_always_off", "", false, true},
		{"parentbased_traceidratio", "0", false, true},
		{"always_off", "", false, false},
		{"traceidratio", "0", false, false},
		{"always_on", "", true, true},
	} {
		t.Run(tc.sampler+tc.arg, func(t *testing.T) {
			s, err := telemetry.Sampler(config.TelemetryConfig{Sampler: tc.sampler, SamplerArg: tc.arg})
			if err != nil {
				t.Fatal(err)
			}
			tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(s))
			defer func() { _ = tp.Shutdown(context.Background()) }()
			_, root := tp.Tracer("t").Start(context.Background(), "root")
			_, child := tp.Tracer("t").Start(sampledParent, "child")
			if root.SpanContext().IsSampled() != tc.rootSampled || child.SpanContext().IsSampled() != tc.childOK {
				t.Errorf("root sampled %v, child of a sampled parent %v; want %v, %v",
					root.SpanContext().IsSampled(), child.SpanContext().IsSampled(), tc.rootSampled, tc.childOK)
			}
		})
	}
}

// Tracer follows the global provider at each span's start, also one set after it was made.
func TestTracerFollowsGlobalProvider(t *testing.T) {
	restoreGlobals(t)
	tr := telemetry.Tracer("x")
	rec := tracetest.NewSpanRecorder()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	_, s := tr.Start(context.Background(), "after")
	s.End()
	if len(rec.Ended()) != 1 || rec.Ended()[0].Name() != "after" {
		t.Fatalf("recorded %v", rec.Ended())
	}
}
