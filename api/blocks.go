package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/cohort-dev/cohort/internal/block"
)

// listBlocks answers GET /api/ai-pages/blocks/: every block type of the registry with its label,
// description and props schema, in the registry's order.
func (s *Server) listBlocks(c *gin.Context) {
	c.JSON(http.StatusOK, block.Registry())
}
