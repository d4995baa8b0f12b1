package api

import "github.com/gin-gonic/gin"

// FeedsDeps serves external product feeds; the routes follow in the commit that builds them.
type FeedsDeps struct{}

func (s *Server) feedRoutes(*gin.RouterGroup) {}
