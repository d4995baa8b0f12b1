package main

import "github.com/cohort-dev/cohort/api"

// designAPI sets the design system and template endpoints' dependencies; they follow in the commit
// that builds them.
func (c *core) designAPI(*api.Deps) {}
