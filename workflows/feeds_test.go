package workflows

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/cohort-dev/cohort/activities"
)

// Recorded history of FeedSync, recorded on the embedded Temporal server by
// TestFeedSyncOnTheServer (COHORT_RECORD_FEED_HISTORIES=1) with the workflow code of its time. A
// change that breaks a running execution's command sequence fails TestFeedSyncReplay; such a change
// goes behind workflow.GetVersion, and a new recording is added here beside the old one.
//
//   - feed_sync_v0.json: a sync requested, two more requests during its first run (one more run),
//     the first run failing (the feed answered HTTP 404, recorded on the feed), the second synced.
var feedHistories = []string{"feed_sync_v0.json"}

func TestFeedSyncReplay(t *testing.T) {
	replayHistories(t, feedHistories, FeedSync)
}

// fakeFeeds are feed activities registered by name on a real worker: feed 1's first sync waits
// for release and then fails permanently; feed 2 is gone.
type fakeFeeds struct {
	mu      sync.Mutex
	release chan struct{}
	syncs   map[int64]int
	active  map[int64]int
	overlap bool
	fails   map[int64][]string
}

func newFakeFeeds() *fakeFeeds {
	return &fakeFeeds{release: make(chan struct{}), syncs: map[int64]int{}, active: map[int64]int{}, fails: map[int64][]string{}}
}

func (f *fakeFeeds) register(w worker.Worker) {
	w.RegisterActivityWithOptions(func(_ context.Context, in activities.SyncFeedInput) (activities.SyncFeedResult, error) {
		f.mu.Lock()
		f.syncs[in.FeedID]++
		n := f.syncs[in.FeedID]
		f.active[in.FeedID]++
		if f.active[in.FeedID] > 1 {
			f.overlap = true
		}
		f.mu.Unlock()
		defer func() {
			f.mu.Lock()
			f.active[in.FeedID]--
			f.mu.Unlock()
		}()
		switch {
		case in.FeedID == 2:
			return activities.SyncFeedResult{}, temporal.NewNonRetryableApplicationError("feed 2: feed deleted: not found", activities.ErrTypeFeedGone, nil)
		case n == 1:
			<-f.release
			return activities.SyncFeedResult{}, temporal.NewNonRetryableApplicationError(
				"the feed's host feeds.example.com answered HTTP 404", activities.ErrTypeFeedSyncFailed, nil)
		}
		return activities.SyncFeedResult{Total: 3, Created: 2, Unchanged: 1}, nil
	}, activity.RegisterOptions{Name: "SyncFeed"})
	w.RegisterActivityWithOptions(func(_ context.Context, in activities.FailFeedSyncInput) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.fails[in.FeedID] = append(f.fails[in.FeedID], in.Reason)
		return nil
	}, activity.RegisterOptions{Name: "FailFeedSync"})
}

// TestFeedSyncOnTheServer runs FeedSync on the embedded Temporal server with scripted activities:
// requests during a run make exactly one more run after it, never a second sync beside it; a
// failed run is recorded on the feed; a deleted feed ends the workflow quietly.
func TestFeedSyncOnTheServer(t *testing.T) {
	fake := newFakeFeeds()
	r := newServerRun(t, FeedSync)
	fake.register(r.w)
	r.start(t)
	tc, queue, ctx := r.tc, r.queue, r.ctx
	jobs := &Starter{Client: tc, TaskQueue: queue}
	tenant := time.Now().UnixNano() // unique on the shared server

	if err := jobs.StartFeedSync(ctx, tenant, 1); err != nil {
		t.Fatal(err)
	}
	id := FeedSyncID(tenant, 1)
	desc, err := tc.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		t.Fatal(err)
	}
	run := desc.WorkflowExecutionInfo.Execution.RunId
	waitFor(t, func() bool {
		fake.mu.Lock()
		defer fake.mu.Unlock()
		return fake.syncs[1] == 1
	})
	for range 2 {
		if err := jobs.StartFeedSync(ctx, tenant, 1); err != nil {
			t.Fatal(err)
		}
	}
	if desc, err := tc.DescribeWorkflowExecution(ctx, id, ""); err != nil || desc.WorkflowExecutionInfo.Execution.RunId != run {
		t.Fatalf("a request during a run started another execution (%v)", err)
	}
	close(fake.release)
	var res FeedSyncResult
	if err := tc.GetWorkflow(ctx, id, run).Get(ctx, &res); err != nil {
		t.Fatalf("feed sync: %v", err)
	}
	if want := (FeedSyncResult{Runs: 2, Last: activities.SyncFeedResult{Total: 3, Created: 2, Unchanged: 1}}); res != want {
		t.Errorf("result %+v, want %+v", res, want)
	}
	fake.mu.Lock()
	if fake.overlap {
		t.Error("two syncs of one feed ran at once")
	}
	if got := fake.fails[1]; len(got) != 1 || got[0] != "the feed's host feeds.example.com answered HTTP 404" {
		t.Errorf("failures recorded %q", got)
	}
	fake.mu.Unlock()

	// A deleted feed: the workflow ends without recording a failure.
	if err := jobs.StartFeedSync(ctx, tenant, 2); err != nil {
		t.Fatal(err)
	}
	var gone FeedSyncResult
	if err := tc.GetWorkflow(ctx, FeedSyncID(tenant, 2), "").Get(ctx, &gone); err != nil || !gone.Gone || gone.Runs != 1 {
		t.Errorf("gone feed: %+v %v", gone, err)
	}
	fake.mu.Lock()
	if len(fake.fails[2]) != 0 {
		t.Errorf("a deleted feed's failure was recorded: %q", fake.fails[2])
	}
	fake.mu.Unlock()

	if os.Getenv("COHORT_RECORD_FEED_HISTORIES") != "" {
		recordHistory(ctx, t, tc, id, run, "feed_sync_v0.json")
	}
}

// TestFeedSyncFailureFailsTheWorkflow: a failed sync with no request pending fails the workflow
// with the recorded reason.
func TestFeedSyncFailureFailsTheWorkflow(t *testing.T) {
	fake := newFakeFeeds()
	close(fake.release)
	r := newServerRun(t, FeedSync)
	fake.register(r.w)
	r.start(t)
	tc, queue, ctx := r.tc, r.queue, r.ctx
	tenant := time.Now().UnixNano()
	if err := (&Starter{Client: tc, TaskQueue: queue}).StartFeedSync(ctx, tenant, 1); err != nil {
		t.Fatal(err)
	}
	var res FeedSyncResult
	err := tc.GetWorkflow(ctx, FeedSyncID(tenant, 1), "").Get(ctx, &res)
	if err == nil || failureMessage("", err) != "the feed's host feeds.example.com answered HTTP 404" {
		t.Errorf("workflow error %v", err)
	}
}
