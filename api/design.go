package api

import "github.com/gin-gonic/gin"

// DesignDeps serves the design system and its extraction stream; the routes follow in the commit that builds them.
type DesignDeps struct{}

func (s *Server) designRoutes(*gin.RouterGroup) {}
