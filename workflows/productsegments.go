package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/cohort-dev/cohort/activities"
	"github.com/cohort-dev/cohort/internal/catalog/prodseg"
)

// KindProductSegmentCompute is the workflow-ID kind of a product segment's compute.
const KindProductSegmentCompute = "product-segment-compute"

// ProductSegmentComputeID is the compute workflow of a product segment: one at a time; a
// request while it runs joins it or asks for one more run (see ProductSegmentCompute).
func ProductSegmentComputeID(tenantID, segmentID int64) string {
	return ID(KindProductSegmentCompute, tenantID, segmentID)
}

// ProductSegmentComputeInput names the product segment.
type ProductSegmentComputeInput struct {
	TenantID  int64
	SegmentID int64
}

// ProductSegmentComputeResult counts the runs of this execution and holds the last one's outcome.
type ProductSegmentComputeResult struct {
	Runs int
	Last prodseg.ComputeResult
}

var prodSeg *activities.ProductSegments

// ProductSegmentCompute evaluates a product segment's definition and stores its members.
//
// Requests arrive as SignalCompute (SignalWithStart, so the first one starts the workflow). A
// request delivered while the run is starting (BeginProductSegmentCompute, before anything is
// read) joins the run; one delivered once the evaluation has begun asks for exactly one more run
// after it (several requests, one more run), so the members are never older than the last
// request. A failed run records status error and last_error; pending requests still run.
func ProductSegmentCompute(ctx workflow.Context, in ProductSegmentComputeInput) (ProductSegmentComputeResult, error) {
	var out ProductSegmentComputeResult
	begun := false
	reqs := newRequests(ctx, on(SignalCompute, func() bool { return begun }))
	short := shortActivity(ctx)
	long := workflow.WithActivityOptions(ctx, handBackSafe(workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Minute,
		HeartbeatTimeout:    activities.TickerHeartbeatTimeout,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 5 * time.Second, BackoffCoefficient: 2, MaximumAttempts: 3},
	}))
	for {
		begun, reqs.rerun = false, false
		err := reqs.await(workflow.ExecuteActivity(short, prodSeg.BeginProductSegmentCompute, activities.BeginProductSegmentComputeInput{
			TenantID: in.TenantID, SegmentID: in.SegmentID,
		}), nil)
		if err == nil {
			begun = true
			var res prodseg.ComputeResult
			compute := activities.ComputeProductSegmentInput{TenantID: in.TenantID, SegmentID: in.SegmentID}
			err = reqs.await(workflow.ExecuteActivity(long, prodSeg.ComputeProductSegment, compute), &res)
			for n := 0; retryHandBack(ctx, err, &n); {
				err = reqs.await(workflow.ExecuteActivity(long, prodSeg.ComputeProductSegment, compute), &res)
			}
			if err == nil {
				out.Runs++
				out.Last = res
			}
		}
		begun = true
		if err != nil {
			if ferr := workflow.ExecuteActivity(short, prodSeg.FailProductSegmentCompute, activities.FailProductSegmentComputeInput{
				TenantID: in.TenantID, SegmentID: in.SegmentID, Message: failureMessage("compute", err),
			}).Get(ctx, nil); ferr != nil {
				workflow.GetLogger(ctx).Warn("recording the product segment compute failure failed", "error", ferr)
			}
		}
		if !reqs.pending() {
			return out, err
		}
		// Runs requested without a pause would grow the history without bound: a fresh
		// execution takes over (it starts with the run just requested).
		if workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			return out, workflow.NewContinueAsNewError(ctx, ProductSegmentCompute, in)
		}
	}
}
