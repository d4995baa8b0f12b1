// Package summary finds the names a workflow's summary shows in the Temporal UI and CLI (its user
// metadata: StaticSummary and StaticDetails): the tenant's slug and the name of what the
// workflow works on (the segment, connector, page, feed ...). The workflow starters of package
// workflows look the names up here when they start a workflow, so an operator can tell runs
// apart without decoding ids. It is a leaf package (no Temporal, no domain imports).
package summary

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Kind is what a workflow works on.
type Kind string

// Kinds of subjects.
const (
	Tenant         Kind = "tenant"          // the tenant itself (product embeddings)
	Segment        Kind = "segment"         // segments.id
	SegmentExport  Kind = "segment-export"  // segment_exports.id: its segment's name and the format
	Connector      Kind = "connector"       // activation_connectors.id: its name and its segment's
	ProductSegment Kind = "product-segment" // product_segments.id
	ImportJob      Kind = "import-job"      // import_jobs.id: the uploaded file's name
	Page           Kind = "page"            // generated_pages.id: the title
	PageExport     Kind = "page-export"     // page_exports.id: its page's title and the format
	Feed           Kind = "feed"            // product_feeds.id
)

// Names are the names of a subject. Any of them is empty when unknown (the row is gone).
type Names struct {
	Tenant string // the tenant's slug
	Name   string // the subject's name (a page's title, an import's file name)
	Of     string // the parent's name: a connector's or an export's segment, an export's page
	Detail string // an export's format, a connector's platform
}

// Store looks names up in Postgres, each with one query scoped by the tenant.
type Store struct {
	Pool *pgxpool.Pool
}

// queries select the subject's name, its parent's name and a detail (Names), for the tenant $1 and the
// subject $2.
var queries = map[Kind]string{
	Segment:       `SELECT name, '', '' FROM segments WHERE tenant_id = $1 AND id = $2`,
	SegmentExport: `SELECT s.name, '', e.format FROM segment_exports e JOIN segments s ON s.id = e.segment_id AND s.tenant_id = e.tenant_id WHERE e.tenant_id = $1 AND e.id = $2`,
	Connector: `SELECT c.name, s.name, c.kind FROM activation_connectors c JOIN segments s ON s.id = c.segment_id AND s.tenant_id = c.tenant_id
		WHERE c.tenant_id = $1 AND c.id = $2`,
	ProductSegment: `SELECT name, '', '' FROM product_segments WHERE tenant_id = $1 AND id = $2`,
	ImportJob:      `SELECT filename, '', '' FROM import_jobs WHERE tenant_id = $1 AND id = $2`,
	Page:           `SELECT title, '', '' FROM generated_pages WHERE tenant_id = $1 AND id = $2`,
	PageExport: `SELECT p.title, '', e.format FROM page_exports e JOIN generated_pages p ON p.tenant_id = e.tenant_id AND p.id = e.page_id
		WHERE e.tenant_id = $1 AND e.id = $2`,
	Feed: `SELECT name, '', '' FROM product_feeds WHERE tenant_id = $1 AND id = $2`,
}

// Names returns the tenant's slug and the subject's names. A subject or tenant that does not
// exist is no error: its names are empty.
func (s *Store) Names(ctx context.Context, tenantID int64, kind Kind, id int64) (Names, error) {
	var n Names
	err := s.Pool.QueryRow(ctx, `SELECT slug FROM tenants WHERE id = $1`, tenantID).Scan(&n.Tenant)
	if errors.Is(err, pgx.ErrNoRows) {
		return n, nil
	}
	if err != nil {
		return n, fmt.Errorf("tenant %d slug: %w", tenantID, err)
	}
	if kind == Tenant {
		return n, nil
	}
	q, ok := queries[kind]
	if !ok {
		return n, fmt.Errorf("names of %q: unknown kind", kind)
	}
	err = s.Pool.QueryRow(ctx, q, tenantID, id).Scan(&n.Name, &n.Of, &n.Detail)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return n, fmt.Errorf("names of %s %d: %w", kind, id, err)
	}
	return n, nil
}
