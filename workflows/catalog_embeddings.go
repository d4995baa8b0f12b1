package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/cohort-dev/cohort/activities"
)

// Product embeddings: one workflow per tenant drains the tenant's embedding queue
// (catalog.DrainEmbeddings) and ends when the queue stays empty.
const (
	KindProductEmbeddings = "product-embeddings"
	// SignalEmbed says products were queued (catalog.EmbeddingScheduler, through SignalWithStart).
	SignalEmbed = "embed"

	// EmbedBatch is the queue rows one drain takes: one provider call (the provider splits it
	// into its own request sizes).
	EmbedBatch = 512
	// EmbedLinger is how long the workflow waits for more work once the queue is empty, then it
	// drains once more and ends if that found nothing. It is longer than the client's kick
	// debounce (catalog.EmbeddingKickDebounce), so a save whose kick was skipped is still drained.
	EmbedLinger = 5 * time.Second
	// EmbedDrainsPerRun bounds the drains of one run; then the workflow continues as new, so
	// its history stays small however long a big import keeps it busy.
	EmbedDrainsPerRun = 200

	embedStartToClose = 2 * time.Minute
	// embedHeartbeat is the drain's heartbeat timeout (from productEmbeddingsHeartbeats on): the
	// drain heartbeats at each renewal of its lease (catalog.EmbeddingLeaseRenewEvery), so the
	// server retries a drain whose worker died within this long, not at the start-to-close
	// timeout. A heartbeating drain is also handed back by a stopping worker.
	embedHeartbeat = 20 * time.Second
	// embedLeaseWaitMax bounds the wait for leased rows (EmbedPendingResult.NextReadyIn, at most
	// catalog.EmbeddingLease).
	embedLeaseWaitMax = time.Minute
	// embedGiveUp ends a drain that kept failing (a provider down, a bad API key): the workflow
	// fails visibly, the rows stay queued, and the sweep starts a new run within a minute.
	embedGiveUp = time.Hour
)

// Versions of ProductEmbeddings' command sequence (workflow.GetVersion).
const (
	productEmbeddingsVersionID = "product-embeddings"
	// productEmbeddingsHeartbeats: the drain has a heartbeat timeout, and when the queue's only
	// rows are leased (by a drain that died) the workflow waits until their lease ends
	// (NextReadyIn) and drains again, instead of ending and leaving them to the sweep.
	productEmbeddingsHeartbeats = 1
)

// ProductEmbeddingsID is the tenant's embedding workflow: "product-embeddings:<tenant>".
func ProductEmbeddingsID(tenantID int64) string { return ID(KindProductEmbeddings, tenantID) }

// ProductEmbeddingsInput names the tenant.
type ProductEmbeddingsInput struct {
	TenantID int64
	Limit    int // queue rows per drain; 0: EmbedBatch
}

// ProductEmbeddingsResult sums the drains of this run.
type ProductEmbeddingsResult struct {
	Drains     int
	Embedded   int
	Unchanged  int
	Superseded int
	Failed     int
	Parked     int
}

var productEmbeddingActs *activities.ProductEmbeddings

// ProductEmbeddings embeds the tenant's queued products: it drains batches until the queue is
// empty, then lingers (EmbedLinger) for a signal; a signal means drain again; when the linger
// ends it drains once more and ends if that found nothing and no signal is pending, unless rows
// are leased (NextReadyIn): then it waits for them (or a signal) and drains again. After
// EmbedDrainsPerRun drains it continues as new. Signals carry no data: the queue in Postgres is
// the work, so a signal dropped at continue-as-new loses nothing (the next run drains first).
func ProductEmbeddings(ctx workflow.Context, in ProductEmbeddingsInput) (ProductEmbeddingsResult, error) {
	var out ProductEmbeddingsResult
	if in.Limit <= 0 {
		in.Limit = EmbedBatch
	}
	heartbeats := workflow.GetVersion(ctx, productEmbeddingsVersionID, workflow.DefaultVersion,
		productEmbeddingsHeartbeats) >= productEmbeddingsHeartbeats
	opts := workflow.ActivityOptions{
		StartToCloseTimeout:    embedStartToClose,
		ScheduleToCloseTimeout: embedGiveUp,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        time.Minute,
			NonRetryableErrorTypes: []string{activities.ErrTypeNoEmbeddingProvider},
		},
	}
	if heartbeats {
		opts.HeartbeatTimeout = embedHeartbeat
	}
	actx := workflow.WithActivityOptions(ctx, opts)
	signals := workflow.GetSignalChannel(ctx, SignalEmbed)
	// takeSignals consumes the pending signals and says whether there were any.
	takeSignals := func() bool {
		got := false
		for signals.ReceiveAsync(nil) {
			got = true
		}
		return got
	}
	drain := func() (activities.EmbedPendingResult, error) {
		var res activities.EmbedPendingResult
		if out.Drains >= EmbedDrainsPerRun {
			takeSignals()
			return res, workflow.NewContinueAsNewError(ctx, ProductEmbeddings, in)
		}
		out.Drains++
		err := workflow.ExecuteActivity(actx, productEmbeddingActs.EmbedPending,
			activities.EmbedPendingInput{TenantID: in.TenantID, Limit: in.Limit}).Get(ctx, &res)
		out.Embedded += res.Embedded
		out.Unchanged += res.Unchanged
		out.Superseded += res.Superseded
		out.Failed += res.Failed
		out.Parked += res.Parked
		return res, err
	}
	// linger waits for a signal or a timer of d and says whether a signal came.
	linger := func(d time.Duration) bool {
		tctx, cancel := workflow.WithCancel(ctx)
		defer cancel()
		timer := workflow.NewTimer(tctx, d)
		signalled := false
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(signals, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, nil)
			signalled = true
		})
		sel.AddFuture(timer, func(workflow.Future) {})
		sel.Select(ctx)
		if signalled {
			takeSignals()
		}
		return signalled
	}
	needDrain := true
	for {
		for needDrain {
			res, err := drain()
			if err != nil {
				return out, err
			}
			needDrain = res.More
		}
		if linger(EmbedLinger) {
			needDrain = true
			continue
		}
		res, err := drain()
		switch {
		case err != nil:
			return out, err
		case res.More:
			needDrain = true
		case res.Read > 0:
			// Work came in while lingering: linger again.
		case takeSignals():
			needDrain = true
		case heartbeats && res.NextReadyIn > 0:
			// Rows are leased by a drain that died (or back off briefly): wait until they are
			// ready, or for a signal, and drain again.
			linger(min(res.NextReadyIn, embedLeaseWaitMax))
			needDrain = true
		default:
			return out, nil
		}
	}
}
