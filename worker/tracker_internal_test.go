package worker

import (
	"testing"
	"time"
)

// TestTrackerActivityAfterStopBegan: an activity that starts after the stop began with none
// running (a task polled just before it) and then ends must not close the idle channel twice (a
// panic the SDK reported as the activity's failure: "close of closed channel").
func TestTrackerActivityAfterStopBegan(t *testing.T) {
	var tr activityTracker
	if n := tr.beginStop(); n != 0 {
		t.Fatalf("beginStop: %d running, want 0", n)
	}
	for range 2 {
		tr.started()
		tr.ended(func(s *stopStats) { s.completed++ })
	}
	if n := tr.wait(time.Second); n != 0 {
		t.Fatalf("wait: %d running, want 0", n)
	}
	if st := tr.stopStats(); st.completed != 2 {
		t.Errorf("stats %+v, want 2 completed", st)
	}
}
