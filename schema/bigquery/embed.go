// Package bigquery holds the BigQuery table schema of the warehouse events table, in the JSON form
// that `bq mk --table` takes (see README.md). The production adapter, internal/warehouse/bigquery,
// creates the table from this same file, so the two cannot drift.
package bigquery

import _ "embed"

// EventsJSON is events.json: the columns of the events table.
//
//go:embed events.json
var EventsJSON []byte
