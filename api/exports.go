package api

import "github.com/gin-gonic/gin"

// ExportsDeps serves page exports; the routes follow in the commit that builds them.
type ExportsDeps struct{}

func (s *Server) exportRoutes(*gin.RouterGroup) {}
