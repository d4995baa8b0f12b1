package main

import (
	"time"

	sdkworker "go.temporal.io/sdk/worker"

	"github.com/cohort-dev/cohort/activities"
	"github.com/cohort-dev/cohort/api"
	"github.com/cohort-dev/cohort/internal/connector"
	"github.com/cohort-dev/cohort/internal/connector/platform"
	"github.com/cohort-dev/cohort/internal/safehttp"
	"github.com/cohort-dev/cohort/workflows"
)

// openConnectors is the activation connector service of the worker, which runs syncs and starts
// none (the API builds its own, activationsAPI).
func (c *core) openConnectors() *connector.Service {
	return connector.NewService(c.db.Gorm, c.db.Pool, c.box, time.Now, connector.Options{AllowHTTP: c.cfg.AllowPrivateNetworks})
}

// activationsAPI builds the activation endpoints' dependencies: a connector service that starts
// manual syncs through the process's starter.
func (c *core) activationsAPI(st *workflows.Starter) *api.ActivationsDeps {
	return &api.ActivationsDeps{
		Service: connector.NewService(c.db.Gorm, c.db.Pool, c.box, time.Now, connector.Options{
			AllowHTTP: c.cfg.AllowPrivateNetworks,
			Starter:   st,
		}),
	}
}

// activationsWorker registers the sync activities (the workflows: worker.Workflows). Outbound calls go through
// safehttp: platform URLs on private or loopback addresses are refused unless
// COHORT_ALLOW_PRIVATE_NETWORKS is set (the tenant reads "destination not allowed"; the log has
// the address), and such refusals, bad URLs and redirect loops fail a sync without retries.
func (c *core) activationsWorker(svc *connector.Service) func(r sdkworker.Registry) {
	acts := &activities.Activations{Svc: svc, Platforms: &connector.Platforms{
		HTTP: safehttp.NewClient(safehttp.Options{AllowPrivate: c.cfg.AllowPrivateNetworks, Timeout: 2 * time.Minute,
			MaxResponseBytes: 8 << 20, Logger: c.log}),
		KlaviyoBaseURL: c.cfg.KlaviyoAPIURL,
		Limiters:       platform.NewLimiters(),
	}, Metrics: c.metrics}
	return func(r sdkworker.Registry) {
		r.RegisterActivity(acts)
	}
}
