package bus

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// EmbeddedNATSOptions configure the NATS server that `cohort dev` runs in its own process.
type EmbeddedNATSOptions struct {
	// Dir holds JetStream's file store (created if missing); a restart finds its messages there.
	Dir string
	// Listen is host:port for outside clients (the nats CLI, a worker in another process); empty
	// serves in-process connections only. Port 0 picks a free one.
	Listen string
	// MaxPayload is the largest message (default 8 MiB, above the largest batch's message).
	MaxPayload int32
	// MaxStore bounds the file store (default 10 GiB).
	MaxStore int64
	// SyncAlways fsyncs every message before it is acknowledged: survives a power loss, not only
	// a crash of the process (whose writes the kernel keeps). Slower.
	SyncAlways bool
	Logger     *slog.Logger
}

// EmbeddedNATS is a NATS server with JetStream running in this process.
type EmbeddedNATS struct {
	srv *server.Server
}

// StartEmbeddedNATS starts the server and waits until it takes connections.
func StartEmbeddedNATS(o EmbeddedNATSOptions) (*EmbeddedNATS, error) {
	if o.Dir == "" {
		return nil, errors.New("embedded nats: a store directory is required")
	}
	if o.MaxPayload <= 0 {
		o.MaxPayload = 8 << 20
	}
	if o.MaxStore <= 0 {
		o.MaxStore = 10 << 30
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	opts := &server.Options{
		ServerName:         "cohort-embedded",
		JetStream:          true,
		StoreDir:           o.Dir,
		JetStreamMaxStore:  o.MaxStore,
		JetStreamMaxMemory: 64 << 20, // nothing uses memory storage
		SyncAlways:         o.SyncAlways,
		MaxPayload:         o.MaxPayload,
		NoSigs:             true, // the process's signals are cohort's, not the server's
		DontListen:         o.Listen == "",
	}
	if o.Listen != "" {
		host, port, err := net.SplitHostPort(o.Listen)
		if err != nil {
			return nil, fmt.Errorf("embedded nats listen address %q: %w", o.Listen, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			return nil, fmt.Errorf("embedded nats listen port %q: %w", port, err)
		}
		if p == 0 {
			p = server.RANDOM_PORT
		}
		opts.Host, opts.Port = host, p
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	srv.SetLoggerV2(natsLogger{o.Logger}, false, false, false)
	srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		return nil, errors.New("embedded nats: not ready within 30s")
	}
	return &EmbeddedNATS{srv: srv}, nil
}

// InProcessConn makes EmbeddedNATS a nats.InProcessConnProvider.
func (e *EmbeddedNATS) InProcessConn() (net.Conn, error) { return e.srv.InProcessConn() }

// ClientURL is the nats:// URL of its listener ("" when it serves in-process only).
func (e *EmbeddedNATS) ClientURL() string {
	if e.srv.Addr() == nil {
		return ""
	}
	return e.srv.ClientURL()
}

// Shutdown stops the server; JetStream writes out what it holds.
func (e *EmbeddedNATS) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}

// natsLogger sends the server's log to slog.
type natsLogger struct{ l *slog.Logger }

func (n natsLogger) Noticef(format string, v ...any) { n.l.Debug("nats: " + fmt.Sprintf(format, v...)) }
func (n natsLogger) Warnf(format string, v ...any)   { n.l.Warn("nats: " + fmt.Sprintf(format, v...)) }
func (n natsLogger) Fatalf(format string, v ...any)  { n.l.Error("nats: " + fmt.Sprintf(format, v...)) }
func (n natsLogger) Errorf(format string, v ...any)  { n.l.Error("nats: " + fmt.Sprintf(format, v...)) }
func (n natsLogger) Debugf(format string, v ...any)  { n.l.Debug("nats: " + fmt.Sprintf(format, v...)) }
func (n natsLogger) Tracef(format string, v ...any)  { n.l.Debug("nats: " + fmt.Sprintf(format, v...)) }
