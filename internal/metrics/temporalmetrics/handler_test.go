package temporalmetrics_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/prometheus/common/expfmt"

	"github.com/cohort-dev/cohort/internal/metrics/temporalmetrics"
)

func exposition(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, f := range fams {
		if _, err := expfmt.MetricFamilyToText(&b, f); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

func TestHandler(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := temporalmetrics.New(reg, temporalmetrics.Options{TaskQueues: []string{"cohort"}})
	wf := h.WithTags(map[string]string{"namespace": "default", "task_queue": "cohort", "workflow_type": "SegmentCompute",
		"client_name": "temporal_go", "exception": "free text: unbounded"})
	wf.Counter("temporal_workflow_completed").Inc(2)
	wf.Counter("temporal_workflow_completed").Inc(0) // no-op
	wf.Timer("temporal_workflow_endtoend_latency").Record(1500 * time.Millisecond)
	// Another tag set on the same name fits the same family.
	h.WithTags(map[string]string{"operation": "StartWorkflowExecution"}).Counter("temporal_workflow_completed").Inc(1)
	// A sticky queue (per worker, random name) is folded.
	h.WithTags(map[string]string{"task_queue": "host-1:3f1c9a0e-uuid", "poller_type": "workflow_sticky_task"}).Gauge("temporal_num_pollers").Update(3)
	h.Gauge("temporal_sticky_cache_size").Update(7)
	// A name taken by another kind is not exported rather than failing.
	h.Gauge("temporal_workflow_completed_total").Update(1)
	h.Counter("bad-name.with dots").Inc(1)

	text := exposition(t, reg)
	for _, want := range []string{
		`temporal_workflow_completed_total{activity_type="",cause="",failure_reason="",namespace="default",operation="",poller_type="",status_code="",task_queue="cohort",worker_type="",workflow_type="SegmentCompute"} 2`,
		`temporal_workflow_completed_total{activity_type="",cause="",failure_reason="",namespace="",operation="StartWorkflowExecution",poller_type="",status_code="",task_queue="",worker_type="",workflow_type=""} 1`,
		`temporal_workflow_endtoend_latency_seconds_sum{activity_type="",cause="",failure_reason="",namespace="default",operation="",poller_type="",status_code="",task_queue="cohort",worker_type="",workflow_type="SegmentCompute"} 1.5`,
		`temporal_num_pollers{activity_type="",cause="",failure_reason="",namespace="",operation="",poller_type="workflow_sticky_task",status_code="",task_queue="sticky",worker_type="",workflow_type=""} 3`,
		`temporal_sticky_cache_size{`,
		`temporal_bad_name_with_dots_total{`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in\n%s", want, text)
		}
	}
	for _, banned := range []string{"client_name", "exception", "free text", "host-1"} {
		if strings.Contains(text, banned) {
			t.Errorf("%q reached the exposition", banned)
		}
	}
	problems, err := promlint.New(strings.NewReader(text)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
}

// Two handlers on one registry (a process that dials Temporal twice) share the families.
func TestHandlersShareARegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	temporalmetrics.New(reg, temporalmetrics.Options{}).Counter("temporal_request").Inc(1)
	temporalmetrics.New(reg, temporalmetrics.Options{}).Counter("temporal_request").Inc(2)
	if text := exposition(t, reg); !strings.Contains(text, "} 3\n") {
		t.Errorf("want one series of 3:\n%s", text)
	}
}
