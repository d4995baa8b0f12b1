package ai

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Operation label values of the provider metrics: one per kind of HTTP call.
const (
	OpEmbed      = "embed"       // one embeddings call (a batch of at most EmbedBatchSize texts)
	OpChat       = "chat"        // one chat completion
	OpChatStream = "chat_stream" // one streamed chat completion, from the request to its last chunk
)

// Outcome label values of cohort_ai_requests_total: ok, or what went wrong. canceled is the
// caller giving up (its context ended, or its stream callback stopped the stream): not the
// provider's fault, so the error-rate alert leaves it out.
const (
	OutcomeOK             = "ok"
	OutcomeUnavailable    = "unavailable"     // unreachable, timed out, 5xx or a malformed answer
	OutcomeRateLimited    = "rate_limited"    // 429
	OutcomeInvalidRequest = "invalid_request" // refused as malformed (400, 404 for an unknown model, ...)
	OutcomeUnauthorized   = "unauthorized"    // our credentials were refused (401/403)
	OutcomeCanceled       = "canceled"
)

var requestOutcomes = []string{OutcomeOK, OutcomeUnavailable, OutcomeRateLimited, OutcomeInvalidRequest, OutcomeUnauthorized, OutcomeCanceled}

// Metrics records the AI provider's HTTP calls, by provider and operation (never by tenant):
//
//	cohort_ai_requests_total{provider,operation,outcome}
//	cohort_ai_request_duration_seconds{provider,operation}
//
// Config.Metrics hands it to the provider; a nil *Metrics records nothing. These say how the
// provider answers; what the calls were for and what they cost is metered apart, by model and
// operation (internal/aispend: cohort_ai_usage_calls_total, cohort_ai_usage_tokens_total).
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewMetrics registers the provider families on reg (once per registry). Every operation and
// outcome of the openai provider starts at zero, so rates and alerts see a series before the
// first call.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cohort_ai_requests_total",
			Help: "Calls to the AI provider's API, by provider, operation (embed, chat, chat_stream) and outcome."},
			[]string{"provider", "operation", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "cohort_ai_request_duration_seconds",
			Help:    "Duration of a call to the AI provider's API (a stream: to its last chunk), by provider and operation.",
			Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300}},
			[]string{"provider", "operation"}),
	}
	reg.MustRegister(m.requests, m.duration)
	for _, op := range []string{OpEmbed, OpChat, OpChatStream} {
		for _, o := range requestOutcomes {
			m.requests.WithLabelValues(ProviderOpenAI, op, o)
		}
	}
	return m
}

// observe records one call of op to provider that began at start and ended with err.
func (m *Metrics) observe(provider, op string, start time.Time, err error) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(provider, op, requestOutcome(err)).Inc()
	m.duration.WithLabelValues(provider, op).Observe(time.Since(start).Seconds())
}

// requestOutcome is err's outcome label: a ProviderError's kind, else canceled (the caller's
// context or stream callback ended the call).
func requestOutcome(err error) string {
	var pe *ProviderError
	switch {
	case err == nil:
		return OutcomeOK
	case !errors.As(err, &pe):
		return OutcomeCanceled
	case errors.Is(pe.Kind, ErrRateLimited):
		return OutcomeRateLimited
	case errors.Is(pe.Kind, ErrUnauthorized):
		return OutcomeUnauthorized
	case errors.Is(pe.Kind, ErrInvalidRequest):
		return OutcomeInvalidRequest
	}
	return OutcomeUnavailable
}
