// Package temporalmetrics exposes the Temporal Go SDK's own metrics (requests, polls, task
// latencies, schedule-to-start, sticky cache...) on a Prometheus registry: Handler implements the
// SDK's client.MetricsHandler over client_golang, as go.temporal.io/sdk/contrib/tally does over
// tally, without that module.
//
// Names: the SDK's names (they start with temporal_) with the Prometheus suffix of their kind:
// counters end in _total, timers are histograms in seconds ending in _seconds, gauges are kept.
// Labels: a fixed set (Labels) on every family, so the SDK's varying tag sets fit one family;
// tags outside it are dropped (client_name is constant; exception types and free text would be
// unbounded), and a task queue that is not one of the configured ones (a worker's sticky queue,
// named after its host and a random id) is reported as "sticky".
package temporalmetrics

import (
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
)

// Labels are the SDK tags kept as labels, in this order.
var Labels = []string{
	"namespace", "task_queue", "workflow_type", "activity_type", "operation",
	"poller_type", "worker_type", "failure_reason", "cause", "status_code",
}

// timerBuckets are the seconds buckets of timers (task latencies: milliseconds to minutes).
var timerBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}

// Options configures a Handler.
type Options struct {
	// TaskQueues are the task queues the process polls; any other task_queue tag is "sticky".
	TaskQueues []string
}

// Handler is a client.MetricsHandler on a Prometheus registry.
type Handler struct {
	fam  *families
	tags map[string]string
}

var _ client.MetricsHandler = (*Handler)(nil)

// families are the metric vectors, created on first use and shared by every tagged handler.
type families struct {
	reg    prometheus.Registerer
	queues []string

	mu       sync.Mutex
	counters map[string]*prometheus.CounterVec
	gauges   map[string]*prometheus.GaugeVec
	timers   map[string]*prometheus.HistogramVec
}

// New makes a handler that registers the SDK's families on reg as the SDK first uses them.
func New(reg prometheus.Registerer, o Options) *Handler {
	return &Handler{fam: &families{
		reg: reg, queues: o.TaskQueues,
		counters: map[string]*prometheus.CounterVec{},
		gauges:   map[string]*prometheus.GaugeVec{},
		timers:   map[string]*prometheus.HistogramVec{},
	}, tags: map[string]string{}}
}

// WithTags returns a handler that adds tags to what it records.
func (h *Handler) WithTags(tags map[string]string) client.MetricsHandler {
	t := maps.Clone(h.tags)
	for k, v := range tags {
		if slices.Contains(Labels, k) {
			t[k] = v
		}
	}
	return &Handler{fam: h.fam, tags: t}
}

// Counter is the counter name with this handler's tags.
func (h *Handler) Counter(name string) client.MetricsCounter {
	vec := h.fam.counter(name)
	if vec == nil {
		return client.MetricsNopHandler.Counter(name)
	}
	c := vec.WithLabelValues(h.values()...)
	return counterFunc(func(n int64) {
		if n > 0 {
			c.Add(float64(n))
		}
	})
}

// Gauge is the gauge name with this handler's tags.
func (h *Handler) Gauge(name string) client.MetricsGauge {
	vec := h.fam.gauge(name)
	if vec == nil {
		return client.MetricsNopHandler.Gauge(name)
	}
	g := vec.WithLabelValues(h.values()...)
	return gaugeFunc(g.Set)
}

// Timer is the timer name with this handler's tags, as a histogram in seconds.
func (h *Handler) Timer(name string) client.MetricsTimer {
	vec := h.fam.timer(name)
	if vec == nil {
		return client.MetricsNopHandler.Timer(name)
	}
	o := vec.WithLabelValues(h.values()...)
	return timerFunc(func(d time.Duration) { o.Observe(d.Seconds()) })
}

type counterFunc func(int64)

func (f counterFunc) Inc(n int64) { f(n) }

type gaugeFunc func(float64)

func (f gaugeFunc) Update(v float64) { f(v) }

type timerFunc func(time.Duration)

func (f timerFunc) Record(d time.Duration) { f(d) }

// values are the label values in Labels order.
func (h *Handler) values() []string {
	out := make([]string, len(Labels))
	for i, l := range Labels {
		v := h.tags[l]
		if l == "task_queue" && v != "" && len(h.fam.queues) > 0 && !slices.Contains(h.fam.queues, v) {
			v = "sticky"
		}
		out[i] = v
	}
	return out
}

var invalidName = regexp.MustCompile(`[^a-zA-Z0-9_]`)

// metricName is a valid Prometheus name for the SDK's name with suffix (unless it has it).
func metricName(name, suffix string) string {
	n := invalidName.ReplaceAllString(name, "_")
	if n == "" {
		return ""
	}
	if !strings.HasPrefix(n, "temporal_") {
		n = "temporal_" + n
	}
	if suffix != "" && !strings.HasSuffix(n, suffix) {
		n += suffix
	}
	return n
}

func help(name string) string { return "Temporal Go SDK metric " + name + "." }

// register registers c, or returns the collector already registered under its name; nil when
// the name is taken by another kind (the SDK's metric is then not exported).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, bool) {
	if err := reg.Register(c); err != nil {
		if are, ok := err.(prometheus.AlreadyRegisteredError); ok {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, true
			}
		}
		var zero C
		return zero, false
	}
	return c, true
}

// vec returns the family called name from m, registering newVec's the first time (nil, also
// later, when a collector of another type holds the name).
func vec[V prometheus.Collector](f *families, m map[string]V, name string, newVec func() V) V {
	f.mu.Lock()
	defer f.mu.Unlock()
	if v, ok := m[name]; ok {
		return v
	}
	v, _ := register(f.reg, newVec())
	m[name] = v
	return v
}

func (f *families) counter(name string) *prometheus.CounterVec {
	return vec(f, f.counters, name, func() *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricName(name, "_total"), Help: help(name)}, Labels)
	})
}

func (f *families) gauge(name string) *prometheus.GaugeVec {
	return vec(f, f.gauges, name, func() *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: metricName(strings.TrimSuffix(name, "_total"), ""), Help: help(name)}, Labels)
	})
}

func (f *families) timer(name string) *prometheus.HistogramVec {
	return vec(f, f.timers, name, func() *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: metricName(name, "_seconds"), Help: help(name), Buckets: timerBuckets}, Labels)
	})
}
