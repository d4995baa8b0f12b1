package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/cohort-dev/cohort/internal/ai"
)

// usageRoutes serves GET /api/usage/?window=: the tenant's model usage by operation and model.
func (s *Server) usageRoutes(a *gin.RouterGroup) {
	a.GET("/usage/", s.require(policyPages), s.getUsage)
}

func (s *Server) getUsage(c *gin.Context) {
	out, err := s.d.Spend.Usage(c.Request.Context(), mustCredential(c).TenantID, c.Query("window"))
	reply(c, http.StatusOK, out, err)
}

// spend is the middleware of an endpoint that spends the tenant's model tokens: its model calls
// are metered to the tenant and op, and it is refused before it starts when the tenant is over
// its AI rate limit (429 with Retry-After) or its monthly token budget (403
// ai_budget_exceeded). Without Deps.Spend only the metering tag is set.
func (s *Server) spend(op string) gin.HandlerFunc {
	return func(c *gin.Context) {
		if !s.allowSpend(c, op) {
			return
		}
		c.Next()
	}
}

// allowSpend tags the request for op and checks the tenant's limits, aborting with the refusal;
// a handler that spends only on some of its inputs (a page made from a template spends nothing)
// calls it itself.
func (s *Server) allowSpend(c *gin.Context, op string) bool {
	tenantID := mustCredential(c).TenantID
	c.Request = c.Request.WithContext(ai.WithSpend(c.Request.Context(), tenantID, op))
	if s.d.Spend == nil {
		return true
	}
	if err := s.d.Spend.Allow(c.Request.Context(), tenantID); err != nil {
		abort(c, err)
		return false
	}
	return true
}

// meterAs tags the request's model calls with the tenant and op without limiting it (semantic
// search keeps its own limit).
func (s *Server) meterAs(op string) gin.HandlerFunc {
	return func(c *gin.Context) {
		c.Request = c.Request.WithContext(ai.WithSpend(c.Request.Context(), mustCredential(c).TenantID, op))
		c.Next()
	}
}
