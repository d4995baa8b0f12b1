package api

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/cohort-dev/cohort/internal/connector"
	"github.com/cohort-dev/cohort/internal/errs"
)

// ActivationJobs starts sync workflows (workflows.SyncJobs in production).
type ActivationJobs interface {
	Sync(ctx context.Context, tenantID, segmentID, connectorID, syncRunID int64) error
}

// ActivationsDeps are the activation endpoints' dependencies.
type ActivationsDeps struct {
	Service *connector.Service
	Jobs    ActivationJobs
	// SyncWorkflowID names the workflow of a manual sync run (workflows.ManualSyncID).
	SyncWorkflowID func(tenantID, connectorID, syncRunID int64) string
}

const maxConnectorBody = 64 << 10

func (s *Server) activationRoutes(a *gin.RouterGroup) {
	g := a.Group("/activations")
	bearer := s.require(policyBearer)
	g.GET("/", bearer, s.listConnectors)
	g.POST("/", bearer, s.createConnector)
	s.setBodyLimit(http.MethodPost, "/api/activations/", maxConnectorBody)
	g.GET("/:id/", bearer, s.getConnector)
	g.PATCH("/:id/", bearer, s.patchConnector)
	s.setBodyLimit(http.MethodPatch, "/api/activations/:id/", maxConnectorBody)
	g.DELETE("/:id/", bearer, s.deleteConnector)
	g.POST("/:id/sync/", bearer, s.syncConnector)
	g.GET("/:id/runs/", bearer, s.connectorRuns)
}

// queryInt reads an optional integer query parameter within [lo, hi]; def when absent.
func queryInt(c *gin.Context, name string, def, lo, hi int64) (int64, error) {
	v := c.Query(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, errs.Invalid(name, fmt.Sprintf("must be an integer from %d to %d", lo, hi))
	}
	return n, nil
}

func (s *Server) listConnectors(c *gin.Context) {
	segmentID, err := queryInt(c, "segment_id", 0, 1, 1<<62)
	if err != nil {
		abort(c, err)
		return
	}
	out, err := s.d.Activations.Service.List(c.Request.Context(), mustCredential(c).TenantID, segmentID)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, out)
}

func (s *Server) createConnector(c *gin.Context) {
	var in connector.CreateInput
	if err := bindStrictJSON(c, &in); err != nil {
		abort(c, err)
		return
	}
	out, err := s.d.Activations.Service.Create(c.Request.Context(), mustCredential(c).TenantID, in)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusCreated, out)
}

func (s *Server) getConnector(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	out, err := s.d.Activations.Service.Get(c.Request.Context(), mustCredential(c).TenantID, id)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, out)
}

func (s *Server) patchConnector(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	var in connector.UpdateInput
	if err := bindStrictJSON(c, &in); err != nil {
		abort(c, err)
		return
	}
	out, err := s.d.Activations.Service.Update(c.Request.Context(), mustCredential(c).TenantID, id, in)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, out)
}

func (s *Server) deleteConnector(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	if err := s.d.Activations.Service.Delete(c.Request.Context(), mustCredential(c).TenantID, id); err != nil {
		abort(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// SyncQueued is the answer of POST /api/activations/<id>/sync/.
type SyncQueued struct {
	Status     string `json:"status"`
	RunID      int64  `json:"run_id"`
	WorkflowID string `json:"workflow_id"`
}

// syncConnector queues a sync now, whatever the connector's status.
func (s *Server) syncConnector(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	ctx := c.Request.Context()
	tenant := mustCredential(c).TenantID
	run, err := s.d.Activations.Service.QueueSync(ctx, tenant, id, func(runID int64) string {
		return s.d.Activations.SyncWorkflowID(tenant, id, runID)
	})
	if err != nil {
		abort(c, err)
		return
	}
	if err := s.d.Activations.Jobs.Sync(ctx, tenant, run.SegmentID, id, run.ID); err != nil {
		_ = s.d.Activations.Service.FailQueued(context.WithoutCancel(ctx), tenant, run.ID, "the sync could not be started: workflows unavailable")
		abort(c, err)
		return
	}
	c.JSON(http.StatusAccepted, SyncQueued{Status: "queued", RunID: run.ID, WorkflowID: run.WorkflowID})
}

func (s *Server) connectorRuns(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	limit, err := queryInt(c, "limit", connector.DefaultRunsLimit, 1, connector.MaxRunsLimit)
	if err != nil {
		abort(c, err)
		return
	}
	out, err := s.d.Activations.Service.Runs(c.Request.Context(), mustCredential(c).TenantID, id, int(limit))
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, out)
}
