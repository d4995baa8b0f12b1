package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/cohort-dev/cohort/internal/identity"
	"github.com/cohort-dev/cohort/internal/warehouse"
)

// The event loader stores each batch in one transaction of its own, with everything the events
// produce (profiles, rollups). StoreNew is how the embedded warehouse, or another warehouse behind
// the ledger, takes part in it (the loader's load.EventStore).

// StoreNew stores the events not stored yet within tx and returns them: with fast, with CopyNew,
// which fails as a whole when any of them is stored already (Retryable); else with InsertNew.
func (w *Writer) StoreNew(ctx context.Context, tx pgx.Tx, events []warehouse.Event, fast bool) ([]warehouse.Event, error) {
	if fast {
		return CopyNew(ctx, tx, events)
	}
	return InsertNew(ctx, tx, events)
}

// SegmentRollups is true: segment queries on the embedded warehouse read the per-user rollups the
// loader keeps beside the events.
func (w *Writer) SegmentRollups() bool { return true }

// Ledger stores events in another warehouse (BigQuery) for the loader: their ids go into the
// ledger warehouse.event_ids within the loader's transaction, and the new events are written to
// the warehouse before that transaction commits. The warehouse deduplicates by insert id, so the
// write of a transaction that then rolls back is harmless when the batch is written again.
type Ledger struct {
	w warehouse.Writer
}

// NewLedger stores events in w through the ledger.
func NewLedger(w warehouse.Writer) *Ledger { return &Ledger{w: w} }

// StoreNew records the events' ids (with CopyNewIDs when fast, which fails as a whole when any is
// recorded already; else with Dedupe) and writes the new events to the warehouse.
func (l *Ledger) StoreNew(ctx context.Context, tx pgx.Tx, events []warehouse.Event, fast bool) ([]warehouse.Event, error) {
	var fresh []warehouse.Event
	var err error
	if fast {
		fresh, err = CopyNewIDs(ctx, tx, events)
	} else {
		fresh, err = Dedupe(ctx, tx, events)
	}
	if err != nil {
		return nil, err
	}
	if len(fresh) > 0 {
		if _, err := l.w.Write(ctx, fresh); err != nil {
			return nil, fmt.Errorf("write %s: %w", l.w.Name(), err)
		}
	}
	return fresh, nil
}

// SegmentRollups is false: another warehouse computes segments from its raw events.
func (l *Ledger) SegmentRollups() bool { return false }

// LinkWriter is a warehouse that keeps a copy of the identity graph (BigQuery's identity_links),
// for its segment queries to resolve ids with.
type LinkWriter interface {
	WriteLinks(ctx context.Context, links []identity.Link) error
}

// WriteLinks writes the loader's new links to the warehouse, before its transaction commits,
// when the warehouse keeps them (LinkWriter); the embedded warehouse reads identity_links itself.
func (l *Ledger) WriteLinks(ctx context.Context, links []identity.Link) error {
	lw, ok := l.w.(LinkWriter)
	if !ok || len(links) == 0 {
		return nil
	}
	if err := lw.WriteLinks(ctx, links); err != nil {
		return fmt.Errorf("write %s links: %w", l.w.Name(), err)
	}
	return nil
}
