package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/cohort-dev/cohort/internal/feed"
)

// FeedsDeps serves external product feeds. The service validates feeds against the tenant's
// product schema and starts their sync workflows.
type FeedsDeps struct {
	Service *feed.Service
}

// feedSyncQueued is the answer of POST /api/ai-pages/feeds/{id}/sync/.
type feedSyncQueued struct {
	Status string     `json:"status"` // always "queued"
	Feed   *feed.Feed `json:"feed"`
}

func (s *Server) feedRoutes(a *gin.RouterGroup) {
	g := a.Group("/ai-pages")
	auth := s.require(policyPages)
	g.GET("/feeds/", auth, s.listFeeds)
	g.POST("/feeds/", auth, s.createFeed)
	g.GET("/feeds/:id/", auth, s.getFeed)
	g.PATCH("/feeds/:id/", auth, s.patchFeed)
	g.DELETE("/feeds/:id/", auth, s.deleteFeed)
	g.POST("/feeds/:id/sync/", auth, s.syncFeed)
}

func (s *Server) listFeeds(c *gin.Context) {
	out, err := s.d.Feeds.Service.List(c.Request.Context(), mustCredential(c).TenantID)
	reply(c, http.StatusOK, out, err)
}

func (s *Server) createFeed(c *gin.Context) {
	var in feed.Input
	if err := bindStrictJSON(c, &in); err != nil {
		abort(c, err)
		return
	}
	out, err := s.d.Feeds.Service.Create(c.Request.Context(), mustCredential(c).TenantID, in)
	reply(c, http.StatusCreated, out, err)
}

func (s *Server) getFeed(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	out, err := s.d.Feeds.Service.Get(c.Request.Context(), mustCredential(c).TenantID, id)
	reply(c, http.StatusOK, out, err)
}

func (s *Server) patchFeed(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	var in feed.Patch
	if err := bindStrictJSON(c, &in); err != nil {
		abort(c, err)
		return
	}
	out, err := s.d.Feeds.Service.Update(c.Request.Context(), mustCredential(c).TenantID, id, in)
	reply(c, http.StatusOK, out, err)
}

func (s *Server) deleteFeed(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	if err := s.d.Feeds.Service.Delete(c.Request.Context(), mustCredential(c).TenantID, id); err != nil {
		abort(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// syncFeed queues a sync: 202 {status: queued, feed}. A request while a sync of the feed is
// queued or running joins it (that sync runs once more after its current run), never a second
// sync beside it.
func (s *Server) syncFeed(c *gin.Context) {
	id, ok := pathID(c, "id")
	if !ok {
		return
	}
	out, err := s.d.Feeds.Service.RequestSync(c.Request.Context(), mustCredential(c).TenantID, id)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusAccepted, feedSyncQueued{Status: "queued", Feed: out})
}
