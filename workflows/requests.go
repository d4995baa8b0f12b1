package workflows

import "go.temporal.io/sdk/workflow"

// requests coalesces the run requests (signals) of a workflow that runs once per request burst
// (PageGenerate, ProductSegmentCompute, FeedSync, SegmentCompute): requests that arrive during a
// run ask for at most one more run after it. The requests are taken in the workflow's own
// coroutine (a separate coroutine blocked in Select takes a signal delivered with the final
// workflow task before ReceiveAsync can see it, and the workflow then ended without the
// request). Taking a signal issues no command: the helper leaves every history as it was.
type requests struct {
	ctx      workflow.Context
	channels []requestChannel
	// rerun says that one more run is asked for.
	rerun bool
}

// requestChannel is a signal channel and whether a request on it during the run in progress
// asks for one more run (false: the run in progress still serves it).
type requestChannel struct {
	signal string
	ch     workflow.ReceiveChannel
	counts func() bool
}

// on is a signal whose requests are coalesced; counts says whether one received during a run
// (in await) asks for one more run.
func on(signal string, counts func() bool) requestChannel {
	return requestChannel{signal: signal, counts: counts}
}

// newRequests takes the requests of signals, in that order.
func newRequests(ctx workflow.Context, signals ...requestChannel) *requests {
	r := &requests{ctx: ctx, channels: signals}
	for i := range r.channels {
		r.channels[i].ch = workflow.GetSignalChannel(ctx, r.channels[i].signal)
	}
	return r
}

// drop takes the requests delivered so far without asking for a run (the run about to start
// serves them).
func (r *requests) drop() {
	for _, c := range r.channels {
		for c.ch.ReceiveAsync(nil) {
		}
	}
}

// await waits for f and takes the requests that arrive meanwhile: one delivered before f
// completes counts as counts says, one delivered with or after it is left to the next await or
// to pending.
func (r *requests) await(f workflow.Future, valuePtr any) error {
	for {
		done := false
		sel := workflow.NewSelector(r.ctx)
		sel.AddFuture(f, func(workflow.Future) { done = true })
		for _, c := range r.channels {
			sel.AddReceive(c.ch, func(ch workflow.ReceiveChannel, _ bool) {
				ch.Receive(r.ctx, nil)
				r.rerun = r.rerun || c.counts()
			})
		}
		sel.Select(r.ctx)
		if done {
			return f.Get(r.ctx, valuePtr)
		}
	}
}

// pending takes the requests not taken yet (the run is over, so each asks for one more run) and
// says whether one more run is asked for: a request must never be dropped by the workflow ending.
func (r *requests) pending() bool {
	for _, c := range r.channels {
		for c.ch.ReceiveAsync(nil) {
			r.rerun = true
		}
	}
	return r.rerun
}
