package store

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Reconnect backoff of a Listener: doubling from the first to the last, back to the first once a
// connection served.
const (
	listenRetryFirst = 250 * time.Millisecond
	listenRetryMax   = 30 * time.Second
)

// Listener keeps an in-memory copy current from Postgres notifications: it LISTENs on Channel on
// one dedicated connection of Pool, catches up (Ready) once it listens, hands every notification
// to Notify and calls Tick at least every Every (for what a notification cannot say, or lost
// while the connection was down). It reconnects after failures with backoff, logging each with
// Down (what the copy does meanwhile).
type Listener struct {
	Pool    *pgxpool.Pool
	Channel string // a plain identifier
	Every   time.Duration
	Log     *slog.Logger
	Down    string // e.g. "membership cache listener stopped; serving from the database until it reconnects"
	// Ready runs once the connection listens: whatever committed before is read here, whatever
	// commits later is notified. An error ends the connection.
	Ready  func(ctx context.Context) error
	Notify func(payload string)
	// Tick runs every Every while connected; an error ends the connection.
	Tick func(ctx context.Context) error
	// Live is told true once Ready succeeded and false when the connection ends.
	Live func(live bool)
}

// Run listens until ctx ends and returns nil then.
func (l *Listener) Run(ctx context.Context) error {
	wait := listenRetryFirst
	for {
		served, err := l.listen(ctx)
		l.Live(false)
		if ctx.Err() != nil {
			return nil
		}
		if served {
			wait = listenRetryFirst
		}
		l.Log.Warn(l.Down, "error", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, listenRetryMax)
	}
}

// listen serves notifications on one connection until it fails or ctx ends; served says whether
// it got as far as serving.
func (l *Listener) listen(ctx context.Context) (served bool, err error) {
	conn, err := l.Pool.Acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("acquire a connection: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN "+l.Channel); err != nil {
		return false, fmt.Errorf("listen: %w", err)
	}
	defer func() {
		// The connection goes back to the pool: stop listening on it.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		if _, err := conn.Exec(uctx, "UNLISTEN *"); err != nil {
			conn.Conn().Close(uctx) //nolint:errcheck // the pool drops a closed connection
		}
	}()
	if err := l.Ready(ctx); err != nil {
		return false, err
	}
	l.Live(true)
	lastTick := time.Now()
	for {
		wctx, cancel := context.WithTimeout(ctx, l.Every)
		n, err := conn.Conn().WaitForNotification(wctx)
		// Read before cancel, which would make it look like the interval had passed.
		waited := wctx.Err() != nil
		cancel()
		switch {
		case err == nil:
			l.Notify(n.Payload)
		case ctx.Err() != nil:
			return true, nil
		case !waited:
			return true, fmt.Errorf("wait for notifications: %w", err) // the connection failed
		}
		if time.Since(lastTick) >= l.Every {
			if err := l.Tick(ctx); err != nil {
				return true, err
			}
			lastTick = time.Now()
		}
	}
}
