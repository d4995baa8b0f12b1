package temporalsrv

import (
	"context"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
)

// A port picked for an internal service and taken by someone else before the server binds it
// (the race between picking and binding, which parallel test packages hit) is retried with new
// ports instead of failing the start.
func TestStartRetriesAPortTakenBeforeBind(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = taken.Close() }()
	var calls atomic.Int32
	internalPort = func(ip string) (int, error) {
		if calls.Add(1) == 4 { // the frontend's HTTP API port on the first attempt
			return taken.Addr().(*net.TCPAddr).Port, nil
		}
		return freePort(ip)
	}
	t.Cleanup(func() { internalPort = freePort })

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srv, err := Start(ctx, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("start with a taken port: %v", err)
	}
	defer srv.Stop()
	if n := calls.Load(); n < 8 {
		t.Fatalf("ports picked %d times: no retry happened", n)
	}
	c, err := client.Dial(client.Options{HostPort: srv.FrontendAddress(), Namespace: srv.Namespace()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		t.Fatalf("server started after the retry is not healthy: %v", err)
	}
}
