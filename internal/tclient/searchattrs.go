package tclient

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"

	"go.temporal.io/sdk/client"

	"github.com/cohort-dev/cohort/workflows/searchattr"
)

// SearchAttributes checks that the namespace has Cohort's custom search attributes, without which
// every workflow start fails: at start (Startup logs what is missing and the command that adds
// it) and as a readiness check (Check fails until they exist, then answers without asking again:
// attributes are not removed from a live namespace).
type SearchAttributes struct {
	c         client.Client
	namespace string
	log       *slog.Logger
	found     atomic.Bool
	warned    atomic.Bool
}

// NewSearchAttributes checks namespace through c.
func NewSearchAttributes(c client.Client, namespace string, logger *slog.Logger) *SearchAttributes {
	return &SearchAttributes{c: c, namespace: namespace, log: logger}
}

// Check returns nil when the attributes exist (or the server will not list them: warned once),
// a *searchattr.MissingError naming what is missing and the command, or the call's error.
func (s *SearchAttributes) Check(ctx context.Context) error {
	if s.found.Load() {
		return nil
	}
	err := searchattr.Check(ctx, s.c, s.namespace)
	switch {
	case err == nil:
		s.found.Store(true)
	case errors.Is(err, searchattr.ErrUnchecked):
		if !s.warned.Swap(true) {
			s.log.Warn("cannot list the temporal namespace's search attributes; make sure Cohort's exist ("+searchattr.Runbook+")",
				"namespace", s.namespace, "error", err)
		}
		return nil
	}
	return err
}

// Startup checks once at a role's start and logs an error naming the missing attributes and the
// command that registers them. The role keeps running (the attributes can be added live: serve's
// /readyz turns ok when they are), but no workflow starts until then.
func (s *SearchAttributes) Startup(ctx context.Context) {
	err := s.Check(ctx)
	var me *searchattr.MissingError
	switch {
	case errors.As(err, &me):
		s.log.Error("temporal search attributes missing: every workflow start fails until they are registered",
			"namespace", s.namespace, "missing", me.Names, "fix", me.Hint())
	case err != nil:
		s.log.Warn("could not check the temporal namespace's search attributes", "namespace", s.namespace, "error", err)
	}
}
