// Package bigquery holds the BigQuery table schemas of the warehouse (the events table and the
// identity graph's identity_links table), in the JSON form
// that `bq mk --table` takes (see README.md). The production adapter, internal/warehouse/bigquery,
// creates the table from this same file, so the two cannot drift.
package bigquery

import _ "embed"

// EventsJSON is events.json: the columns of the events table.
//
//go:embed events.json
var EventsJSON []byte

// IdentityLinksJSON is identity_links.json: the columns of the identity_links table, in the
// events table's dataset.
//
//go:embed identity_links.json
var IdentityLinksJSON []byte
