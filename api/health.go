package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
)

// Version is the build's version, stamped at link time by the release build
// (deploy/Dockerfile, deploy/cloudbuild.yaml):
//
//	go build -ldflags "-X github.com/cohort-dev/cohort/api.Version=v1.2.3" ./cmd/cohort
//
// It is shown at /healthz and logged when a role starts; "dev" when not stamped.
var Version = "dev"

// healthz is liveness: the process serves HTTP. It also names the running build.
func (s *Server) healthz(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"status": "ok", "version": Version})
}

type readyResponse struct {
	Status string            `json:"status"` // ok | unavailable
	Checks map[string]string `json:"checks"` // dependency -> ok | unavailable | timeout
	// Hints say what an operator does about a failed check whose error offers one (Hint).
	Hints map[string]string `json:"hints,omitempty"`
}

// readyHint is a readiness error that tells the operator what to do (a missing setup step),
// shown in /readyz's hints: it must name no secret.
type readyHint interface {
	error
	Hint() string
}

// readyz is readiness: every dependency (Postgres, Temporal, Temporal's search attributes, ...)
// answers within 2 s. A check that has not answered by then counts as unavailable; details go to
// the log, not the response, but for a hint of what to do (readyHint).
func (s *Server) readyz(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
	defer cancel()
	resp := readyResponse{Status: "ok", Checks: map[string]string{}}
	type result struct {
		name string
		err  error
	}
	results := make(chan result, len(s.d.Ready))
	for _, chk := range s.d.Ready {
		go func() { results <- result{chk.Name, chk.Check(ctx)} }()
		resp.Checks[chk.Name] = "timeout"
	}
	for range s.d.Ready {
		select {
		case r := <-results:
			resp.Checks[r.name] = "ok"
			if r.err != nil {
				resp.Checks[r.name] = "unavailable"
				s.d.Logger.Warn("readiness check failed", "check", r.name, "error", r.err)
				if h, ok := errors.AsType[readyHint](r.err); ok {
					if resp.Hints == nil {
						resp.Hints = map[string]string{}
					}
					resp.Hints[r.name] = h.Hint()
				}
			}
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	for _, v := range resp.Checks {
		if v != "ok" {
			resp.Status = "unavailable"
		}
	}
	status := http.StatusOK
	if resp.Status != "ok" {
		status = http.StatusServiceUnavailable
	}
	c.JSON(status, resp)
}
