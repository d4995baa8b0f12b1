package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/metrics"
	"github.com/cohort-dev/cohort/internal/search"
)

// SearchDeps are the semantic search endpoint's dependencies.
type SearchDeps struct {
	Service *search.Service
}

func (s *Server) searchRoutes(a *gin.RouterGroup) {
	a.GET("/ai-pages/query", s.require(policyPages), s.meterAs(ai.OpSearch), s.searchProducts)
}

// searchProducts: GET /api/ai-pages/query?q=&limit=&segment_id=. Parameters that are not
// integers (or out of range) are refused here; the service counts the request against the
// tenant's rate limit, then validates q and searches.
func (s *Server) searchProducts(c *gin.Context) {
	limit, err := queryInt(c, "limit", 0, 1, search.MaxLimit)
	if err != nil {
		abort(c, err)
		return
	}
	in := search.In{Query: c.Query("q"), Limit: int(limit)}
	if raw, ok := c.GetQuery("segment_id"); ok {
		id, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || id < 1 {
			abort(c, errs.Invalid("segment_id", "must be a positive integer (a product segment id)"))
			return
		}
		in.SegmentID = &id
	}
	start := time.Now()
	out, err := s.d.Search.Service.Query(c.Request.Context(), mustCredential(c).TenantID, in)
	if err != nil {
		abort(c, err)
		s.d.Metrics.Searched(time.Since(start), outcomeOf(c))
		if status, body := mapError(err); status == http.StatusServiceUnavailable {
			s.d.Metrics.SearchUnavailable(body.Code)
		}
		return
	}
	s.d.Metrics.Searched(time.Since(start), metrics.OutcomeOK)
	c.JSON(http.StatusOK, out)
}
