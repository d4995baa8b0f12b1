package main

import (
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"

	"github.com/cohort-dev/cohort/api"
	"github.com/cohort-dev/cohort/worker"
)

// feedsAPI sets the feed sync endpoints' dependencies; they follow in the commit that builds them.
func (c *core) feedsAPI(*api.Deps, client.Client) {}

// feedsWorker registers the feed sync workflow; it follows in the commit that builds it.
func (c *core) feedsWorker(client.Client, *catalogParts) worker.Registration {
	return func(sdkworker.Registry) {}
}
