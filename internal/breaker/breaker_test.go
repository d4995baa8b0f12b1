package breaker_test

import (
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/breaker"
	"github.com/cohort-dev/cohort/internal/testenv"
)

// TestBreaker walks closed -> open -> half-open (one probe) -> open again -> closed.
func TestBreaker(t *testing.T) {
	clock := testenv.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b := breaker.New(clock.Now, 2, time.Minute)
	step := func(name string, want bool) {
		t.Helper()
		if got := b.Allow(); got != want {
			t.Fatalf("%s: Allow %v, want %v", name, got, want)
		}
	}
	step("closed", true)
	b.Failure()
	step("one failure", true)
	b.Abandon() // a caller that gave up tells nothing
	step("after an abandoned call", true)
	b.Failure()
	if !b.IsOpen() {
		t.Fatal("two consecutive failures did not open it")
	}
	step("open", false)
	clock.Advance(time.Minute)
	step("the probe after the cool-down", true)
	step("a second call while the probe is out", false)
	b.Failure()
	step("the probe failed: open again", false)
	clock.Advance(time.Minute)
	step("the next probe", true)
	b.Success()
	if b.IsOpen() {
		t.Fatal("a successful probe did not close it")
	}
	step("closed again", true)
	if b.Threshold() != 2 || b.Cooldown() != time.Minute {
		t.Errorf("Threshold %d, Cooldown %s", b.Threshold(), b.Cooldown())
	}
}
