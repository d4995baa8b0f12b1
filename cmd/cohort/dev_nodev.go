//go:build nodev

package main

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"github.com/cohort-dev/cohort/internal/config"
)

// The production build (-tags nodev) leaves the embedded Temporal server out.
func runDev(context.Context, *config.Config, *slog.Logger, io.Writer) error {
	return errors.New("this binary was built with -tags nodev and has no embedded dev stack; use the default build for cohort dev")
}
