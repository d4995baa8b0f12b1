package main

import (
	"time"

	"github.com/cohort-dev/cohort/api"
	"github.com/cohort-dev/cohort/internal/pagebuild"
	"github.com/cohort-dev/cohort/internal/search"
)

// withBuilder adds the page builder agent to the pages' dependencies: it runs in the API process
// over the configured AI provider (the local provider's command planner by default) and fills
// product grids through srch. When the provider cannot be built, the build endpoints answer 503.
func (c *core) withBuilder(d *api.PagesDeps, srch *search.Service) *api.PagesDeps {
	provider, err := c.openAI()
	if err != nil {
		c.log.Error("page builder: the AI provider cannot be built; builds answer 503", "error", err)
		return d
	}
	var s pagebuild.Searcher
	if srch != nil {
		s = srch
	}
	d.Builder = pagebuild.NewService(c.db.Pool, d.Service, s, provider, time.Now, c.log, pagebuild.Options{Metrics: c.metrics})
	return d
}
