package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"
)

// On SIGTERM serve stops accepting and lets a request in flight finish (it gets its answer), then
// logs what it drained.
func TestServeHTTPDrainsInFlightRequests(t *testing.T) {
	log := &syncBuffer{}
	logger := slog.New(slog.NewTextHandler(log, nil))
	entered := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		time.Sleep(500 * time.Millisecond)
		_, _ = io.WriteString(w, "finished")
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, done, err := serveHTTP(ctx, "127.0.0.1:0", h, logger, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		body string
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := http.Get("http://" + addr.String() + "/")
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		got <- answer{string(b), err}
	}()
	<-entered
	cancel() // the signal
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	a := <-got
	if a.err != nil || a.body != "finished" {
		t.Fatalf("the request in flight got %q, %v; want its answer", a.body, a.err)
	}
	logged := log.String()
	for _, want := range []string{"HTTP server draining", "in_flight=1", "HTTP server stopped", "finished=1", "cut_off=0"} {
		if !strings.Contains(logged, want) {
			t.Errorf("log lacks %q:\n%s", want, logged)
		}
	}
}
