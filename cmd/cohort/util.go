package main

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/cohort-dev/cohort/internal/devstack"
)

// redactURL hides a password in a database URL before it is printed.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable database url)"
	}
	return u.Redacted()
}

func ignoreClosed(err error) error {
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// databaseBanner names the database cohort dev uses, where it came from and its (redacted) URL.
func databaseBanner(pg *devstack.Postgres, databaseURL string) string {
	name := pg.Database
	if name == "" {
		name = "(as named by DATABASE_URL)"
	}
	return name + "  [" + string(pg.Source) + ": " + redactURL(databaseURL) + "]"
}
