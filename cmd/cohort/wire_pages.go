package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/cohort-dev/cohort/api"
	"github.com/cohort-dev/cohort/internal/design"
	"github.com/cohort-dev/cohort/internal/page"
	"github.com/cohort-dev/cohort/internal/pageexport"
	"github.com/cohort-dev/cohort/internal/pagehost"
	"github.com/cohort-dev/cohort/workflows"
)

// pagesAPI builds the /api/ai-pages/ endpoints' dependencies: a page service that starts page
// generation through st and counts public reads in memory. Its flusher runs until
// c.stopPageCounts, which the core's close calls (a role closes it after its HTTP server
// stopped; dev calls it right then, before stopping its worker), so the reads of the last
// requests are written too.
func (c *core) pagesAPI(st *workflows.Starter) *api.PagesDeps {
	svc := c.openPages(st)
	c.reg.MustRegister(page.NewCounterCollector(svc))
	c.stopPageCounts = sync.OnceFunc(supervisePageCounts(svc, c.log))
	c.closers = append(c.closers, c.stopPageCounts)
	hosted := pagehost.New(pagehost.Deps{
		Pages:  svc,
		Design: pageexport.DesignStore{Store: design.NewStore(c.db.Pool, time.Now)},
		Keys:   pageexport.NewKeys(c.db.Pool, time.Now),
	})
	return &api.PagesDeps{Service: svc, Hosted: hosted, PublicURL: c.cfg.PublicBaseURL}
}

// openPages builds a page service over the core's database; gen starts generation (nil in a
// process that only runs it, the worker: there creates and regenerates answer 503).
func (c *core) openPages(gen page.Generator) *page.Service {
	return page.NewService(c.db.Pool, gen, time.Now, c.log, page.Options{})
}

// supervisePageCounts runs the service's view counter flusher until the returned stop is called;
// stop waits for its final flush. An error it returns (the final flush failed: the reads counted
// since the last flush are lost) is logged.
func supervisePageCounts(svc *page.Service, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := svc.Run(ctx); err != nil {
			log.Error("page view counter stopped", "error", err)
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
