package api

import "github.com/gin-gonic/gin"

// TemplatesDeps serves page templates; the routes follow in the commit that builds them.
type TemplatesDeps struct{}

func (s *Server) templateRoutes(*gin.RouterGroup) {}
