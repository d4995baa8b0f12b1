package load_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/ingest/ingesttest"
	"github.com/cohort-dev/cohort/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// recv is the receipt time used by the validation tests.
var recv = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

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
