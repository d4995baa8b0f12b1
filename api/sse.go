package api

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
)

// sseStream is a text/event-stream answer (the build and design-extraction streams): each event
// one "data: <JSON>" line and a blank line, flushed as it is written. With a keep-alive interval,
// a comment line goes out after that much silence, so proxies and load balancers do not close a
// stream that is waiting on a slow model.
type sseStream struct {
	c    *gin.Context
	mu   sync.Mutex
	last time.Time
	stop chan struct{}
	wg   sync.WaitGroup
}

// startSSE answers 200 with the stream's headers (flushed at once) and, when keepAlive > 0,
// starts the keep-alive writer; close stops it.
func startSSE(c *gin.Context, keepAlive time.Duration) *sseStream {
	h := c.Writer.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	c.Status(http.StatusOK)
	c.Writer.WriteHeaderNow()
	c.Writer.Flush()
	s := &sseStream{c: c, last: time.Now(), stop: make(chan struct{})}
	if keepAlive > 0 {
		s.wg.Add(1)
		go s.keepAlive(keepAlive)
	}
	return s
}

func (s *sseStream) keepAlive(every time.Duration) {
	defer s.wg.Done()
	t := time.NewTicker(every / 3)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.mu.Lock()
			idle := time.Since(s.last) >= every
			s.mu.Unlock()
			if idle {
				_ = s.write([]byte(": keep-alive\n\n")) // a failed write means the client left; the producer sees its context end
			}
		}
	}
}

func (s *sseStream) write(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.c.Writer.Write(b); err != nil {
		return err
	}
	s.c.Writer.Flush()
	s.last = time.Now()
	return nil
}

// send writes one event; an error means the client left (or v does not marshal).
func (s *sseStream) send(v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	buf := make([]byte, 0, len(raw)+8)
	buf = append(buf, "data: "...)
	buf = append(buf, raw...)
	buf = append(buf, '\n', '\n')
	return s.write(buf)
}

// close stops the keep-alive writer; the handler returning ends the answer.
func (s *sseStream) close() {
	close(s.stop)
	s.wg.Wait()
}
