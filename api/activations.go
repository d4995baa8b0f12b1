package api

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/cohort-dev/cohort/internal/connector"
	"github.com/cohort-dev/cohort/internal/errs"
)

// ActivationsDeps are the activation endpoints' dependencies. The service starts manual syncs
// (connector.Options.Starter).
type ActivationsDeps struct {
	Service *connector.Service
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
	reply(c, http.StatusOK, out, err)
}

func (s *Server) createConnector(c *gin.Context) {
	var in connector.CreateInput
	if err := bindStrictJSON(c, &in); err != nil {
		abort(c, err)
		return
	}
	out, err := s.d.Activations.Service.Create(c.Request.Context(), mustCredential(c).TenantID, in)
	reply(c, http.StatusCreated, out, err)
}

func (s *Server) getConnector(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	out, err := s.d.Activations.Service.Get(c.Request.Context(), mustCredential(c).TenantID, id)
	reply(c, http.StatusOK, out, err)
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
	reply(c, http.StatusOK, out, err)
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

// syncConnector queues a sync now, whatever the connector's status, and starts its workflow.
func (s *Server) syncConnector(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	run, err := s.d.Activations.Service.RequestSync(c.Request.Context(), mustCredential(c).TenantID, id)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusAccepted, SyncQueued{Status: run.Status, RunID: run.ID, WorkflowID: run.WorkflowID})
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
	reply(c, http.StatusOK, out, err)
}
