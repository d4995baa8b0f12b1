package ingest_test

import (
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/ingest/ingesttest"
	"github.com/cohort-dev/cohort/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// recv is the receipt time used by the validation tests.
var recv = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// stepClock is a clock that advances by step on every call, so records written in order have
// strictly increasing timestamps.
type stepClock struct {
	mu   sync.Mutex
	t    time.Time
	step time.Duration
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(c.step)
	return c.t
}

// eventJSON builds a raw event from key/value pairs; values are encoded with encoding/json unless
// they are json.RawMessage.
func eventJSON(kv ...any) []byte {
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(kv[i])
		b.Write(k)
		b.WriteByte(':')
		switch v := kv[i+1].(type) {
		case json.RawMessage:
			b.Write(v)
		default:
			enc, err := json.Marshal(v)
			if err != nil {
				panic(err)
			}
			b.Write(enc)
		}
	}
	b.WriteByte('}')
	return []byte(b.String())
}

// The helpers shared with the other ingest package's tests.
var (
	openPool    = ingesttest.OpenPool
	newErrorLog = ingesttest.NewErrorLog
	queryInt    = ingesttest.QueryInt
	whEvent     = ingesttest.Event
	eventually  = ingesttest.Eventually
	ids         = ingesttest.IDs
	fmtIDs      = ingesttest.FmtIDs
)
