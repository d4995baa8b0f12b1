package load_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/cohort-dev/cohort/internal/ingest/load"
	"github.com/cohort-dev/cohort/internal/testenv"
)

// Each publish's trace leads to the warehouse write that stored its events: the loader's batch
// span is linked to the messages' delivery spans (children of the publishing spans), and the
// write's Postgres spans are children of the batch span.
func TestLoaderBatchSpanLinksPublishers(t *testing.T) {
	rec := testenv.RecordSpans(t)
	n, env := newNATSLoaderEnv(t, load.LoaderConfig{MaxBatchDelay: 50 * time.Millisecond})
	env.start(t)
	publishers := map[trace.TraceID]bool{}
	for i := range 3 {
		ctx, span := otel.Tracer("test").Start(context.Background(), "accept batch")
		publishers[span.SpanContext().TraceID()] = true
		if err := env.pub.Publish(ctx, 1, tenantEvents(1, "u"+string(rune('a'+i)), 5)); err != nil {
			t.Fatal(err)
		}
		span.End()
	}
	n.streamEmpty(t)

	var linked map[trace.TraceID]bool
	eventually(t, 10*time.Second, "batch spans linked to every publisher", func() (bool, string) {
		linked = map[trace.TraceID]bool{}
		for _, s := range rec.Ended() {
			if s.Name() != "load warehouse batch" {
				continue
			}
			for _, l := range s.Links() {
				linked[l.SpanContext.TraceID()] = true
			}
		}
		for id := range publishers {
			if !linked[id] {
				return false, "a publisher's trace has no linked batch"
			}
		}
		return true, ""
	})
	batches := map[trace.SpanID]bool{}
	for _, s := range rec.Ended() {
		if s.Name() == "load warehouse batch" {
			batches[s.SpanContext().SpanID()] = true
		}
	}
	children := 0
	for _, s := range rec.Ended() {
		if batches[s.Parent().SpanID()] {
			children++
		}
	}
	if children == 0 {
		t.Fatal("the batch spans have no child spans (the warehouse write's queries)")
	}
}
