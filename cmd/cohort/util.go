package main

import (
	"errors"
	"net/http"
	"net/url"
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
