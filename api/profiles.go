package api

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/ident"
	"github.com/cohort-dev/cohort/internal/identity"
)

// ProfileReader reads a tenant's canonical profiles (identity.Profiles).
type ProfileReader interface {
	Get(ctx context.Context, tenantID int64, id string) (identity.Profile, error)
}

// ProfilesDeps are the profile endpoint's dependencies.
type ProfilesDeps struct {
	Reader ProfileReader
}

func (s *Server) profileRoutes(a *gin.RouterGroup) {
	a.GET("/profiles/:id/", s.require(policyPages), s.getProfile)
}

// getProfile: GET /api/profiles/{id}/ -> the canonical profile of a user id or of an id linked
// to one, with the linked ids; 404 for an id the tenant does not know.
func (s *Server) getProfile(c *gin.Context) {
	id := c.Param("id")
	if err := ident.CheckUserID(id); err != nil {
		abort(c, &errs.ValidationError{Code: "invalid_user_id", Fields: map[string]string{"id": err.Error()}})
		return
	}
	p, err := s.d.Profiles.Reader.Get(c.Request.Context(), mustCredential(c).TenantID, id)
	if err != nil {
		abort(c, err)
		return
	}
	c.JSON(http.StatusOK, p)
}
