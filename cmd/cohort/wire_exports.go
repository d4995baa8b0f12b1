package main

import (
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/cohort-dev/cohort/api"
	"github.com/cohort-dev/cohort/worker"
)

// exportsAPI sets the page export endpoints' dependencies; they follow in the commit that builds them.
func (c *core) exportsAPI(*api.Deps, client.Client) {}

// exportsWorker registers the page export workflow; it follows in the commit that builds it.
func (c *core) exportsWorker(client.Client) worker.Registration {
	return func(sdkworker.Registry) {}
}
