//go:build topology

// Command temporalserver runs the topology test's Temporal server as a process of its own: the
// Temporal server of this module's go.mod (the one `cohort dev` embeds) on a SQLite file, until
// SIGTERM or SIGINT. It is built by test/topology only; the temporal CLI's dev server is an older
// Temporal (CLI v1.5.1: server 1.29) and the CLI versions with a newer one cannot be installed
// from the module proxy.
//
//	temporalserver -port 7233 -db /tmp/temporal.db
package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/cohort-dev/cohort/internal/devstack/temporalsrv"
)

func main() {
	port := flag.Int("port", 7233, "the frontend's gRPC port on 127.0.0.1")
	db := flag.String("db", "", "the SQLite file (empty: in memory)")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	srv, err := temporalsrv.Start(ctx, temporalsrv.Options{FrontendPort: *port, DatabaseFile: *db, Logger: logger})
	if err != nil {
		logger.Error("temporal server", "err", err)
		os.Exit(1)
	}
	logger.Info("temporal server started", "frontend", srv.FrontendAddress(), "namespace", srv.Namespace())
	<-ctx.Done()
	srv.Stop()
}
