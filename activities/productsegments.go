package activities

import (
	"context"
	"errors"

	"go.temporal.io/sdk/temporal"

	"github.com/cohort-dev/cohort/internal/catalog/prodseg"
	"github.com/cohort-dev/cohort/internal/errs"
)

// Error types of permanent product segment failures (non-retryable application errors).
const (
	ErrTypeProductSegmentGone    = "ProductSegmentNotFound"
	ErrTypeProductSegmentInvalid = "ProductSegmentInvalid"
)

// ProductSegmentService is the part of the product segment service (*prodseg.Service) the compute
// activities call.
type ProductSegmentService interface {
	BeginCompute(ctx context.Context, tenantID, id int64) error
	Compute(ctx context.Context, tenantID, id int64) (prodseg.ComputeResult, error)
	MarkError(ctx context.Context, tenantID, id int64, msg string) error
}

// ProductSegments are the product segment compute activities. Their method names are unique
// among all registered activities (Temporal names activities by method).
type ProductSegments struct {
	Svc ProductSegmentService
}

// BeginProductSegmentComputeInput names the segment.
type BeginProductSegmentComputeInput struct {
	TenantID  int64
	SegmentID int64
}

// BeginProductSegmentComputeResult is empty: the compute has begun.
type BeginProductSegmentComputeResult struct{}

// BeginProductSegmentCompute marks the segment computing.
func (a *ProductSegments) BeginProductSegmentCompute(ctx context.Context, in BeginProductSegmentComputeInput) (BeginProductSegmentComputeResult, error) {
	return BeginProductSegmentComputeResult{}, productSegmentPermanent(a.Svc.BeginCompute(ctx, in.TenantID, in.SegmentID))
}

// ComputeProductSegmentInput names the segment.
type ComputeProductSegmentInput struct {
	TenantID  int64
	SegmentID int64
}

// ComputeProductSegment evaluates the segment's definition and replaces its members in one
// transaction (see prodseg.Service.Compute); it heartbeats while the database works.
func (a *ProductSegments) ComputeProductSegment(ctx context.Context, in ComputeProductSegmentInput) (prodseg.ComputeResult, error) {
	stop := heartbeat(ctx)
	defer stop()
	res, err := a.Svc.Compute(ctx, in.TenantID, in.SegmentID)
	if err != nil {
		return prodseg.ComputeResult{}, productSegmentPermanent(err)
	}
	return res, nil
}

// FailProductSegmentComputeInput records a failed compute.
type FailProductSegmentComputeInput struct {
	TenantID  int64
	SegmentID int64
	Message   string
}

// FailProductSegmentComputeResult is empty.
type FailProductSegmentComputeResult struct{}

// FailProductSegmentCompute marks the segment error with the message in last_error.
func (a *ProductSegments) FailProductSegmentCompute(ctx context.Context, in FailProductSegmentComputeInput) (FailProductSegmentComputeResult, error) {
	return FailProductSegmentComputeResult{}, a.Svc.MarkError(ctx, in.TenantID, in.SegmentID, in.Message)
}

// productSegmentPermanent turns errors retrying cannot fix (the segment is gone, its definition
// no longer fits the schema) into non-retryable application errors; others are retried.
func productSegmentPermanent(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errs.ErrNotFound):
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeProductSegmentGone, err)
	case errors.Is(err, errs.ErrInvalid):
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeProductSegmentInvalid, err)
	}
	return err
}
