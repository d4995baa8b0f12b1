package api

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
)

// healthz is liveness: the process serves HTTP.
func (s *Server) healthz(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) }

type readyResponse struct {
	Status string            `json:"status"` // ok | unavailable
	Checks map[string]string `json:"checks"` // dependency -> ok | error text
}

// readyz is readiness: every dependency (Postgres, Temporal, ...) answers within 2 s.
func (s *Server) readyz(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
	defer cancel()
	resp := readyResponse{Status: "ok", Checks: map[string]string{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, chk := range s.d.Ready {
		wg.Go(func() {
			err := chk.Check(ctx)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				resp.Status = "unavailable"
				resp.Checks[chk.Name] = err.Error()
				return
			}
			resp.Checks[chk.Name] = "ok"
		})
	}
	wg.Wait()
	status := http.StatusOK
	if resp.Status != "ok" {
		status = http.StatusServiceUnavailable
	}
	c.JSON(status, resp)
}
