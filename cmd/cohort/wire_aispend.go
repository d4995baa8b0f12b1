package main

import (
	"time"

	"github.com/cohort-dev/cohort/internal/ai"
	"github.com/cohort-dev/cohort/internal/aispend"
)

// openSpend builds the per-tenant AI limiter and meter of the process, its counters on the
// process's registry: the API checks it before every endpoint that spends tokens, and every
// provider the roles build reports its calls to it.
func (c *core) openSpend() (*aispend.Service, error) {
	return aispend.New(c.db.Pool, time.Now, c.log, c.reg, aispend.Config{RateLimit: c.cfg.AI.RateLimit, RateWindow: c.cfg.AI.RateWindow})
}

// meteredAI wraps a provider so its calls are metered to the tenant and operation their
// context names (ai.WithSpend).
func (c *core) meteredAI(p ai.Provider) ai.Provider {
	if c.spend == nil {
		return p
	}
	return ai.NewMetered(p, c.spend)
}
