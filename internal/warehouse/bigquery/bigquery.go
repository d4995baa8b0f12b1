// Package bigquery is the production warehouse: the events table in BigQuery (schema/bigquery),
// written with the streaming insertAll API.
//
// Idempotency is BigQuery's: every row carries insertId "<tenant_id>:<event_id>", which BigQuery
// uses for best-effort dedupe over a short window (about a minute). A redelivery outside that
// window stores the row again, so queries dedupe on (tenant_id, event_id) with
// QUALIFY ROW_NUMBER() OVER (PARTITION BY tenant_id, event_id ORDER BY received_at) = 1
// (see schema/bigquery/README.md).
package bigquery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"time"

	"cloud.google.com/go/bigquery"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"

	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/identity"
	"github.com/cohort-dev/cohort/internal/warehouse"
	bqschema "github.com/cohort-dev/cohort/schema/bigquery"
)

const (
	// MaxRowsPerRequest is BigQuery's recommended maximum number of rows per insertAll request.
	MaxRowsPerRequest = 500
	// MaxBytesPerRequest keeps an insertAll request below BigQuery's 10 MB HTTP request limit.
	MaxBytesPerRequest = 9_000_000

	// DefaultTable is the table name when Config.Table is empty.
	DefaultTable = "events"
	// LinksTable is the identity graph's table, in the events table's dataset
	// (schema/bigquery/identity_links.json).
	LinksTable = "identity_links"
	// DefaultRequestTimeout bounds one API call when Config.RequestTimeout is zero.
	DefaultRequestTimeout = 30 * time.Second

	// requestOverhead is the size of an insertAll body around its rows ({"rows":[...]} and the
	// request flags), generously rounded up.
	requestOverhead = 256
)

// PartitionField is the TIMESTAMP column the table is partitioned on, by day.
const PartitionField = "occurred_at"

// ClusteringFields are the table's clustering columns, in order.
var ClusteringFields = []string{"tenant_id", "event_type", "user_id"}

// Config configures a Writer.
type Config struct {
	Project string
	Dataset string
	Table   string // DefaultTable ("events") when empty

	// ClientOptions are passed to bigquery.NewClient (credentials, endpoint, HTTP client).
	ClientOptions []option.ClientOption

	// Now is the clock, used for a zero Event.ReceivedAt; time.Now when nil.
	Now func() time.Time

	// RequestTimeout bounds each API call (one insertAll request, tables.get, tables.insert),
	// including the client library's own retries of 5xx and rate-limit errors, which otherwise
	// go on until the context ends. DefaultRequestTimeout when zero.
	RequestTimeout time.Duration

	// PartitionExpiration and RequirePartitionFilter are applied by EnsureTable when it creates
	// the table (see schema/bigquery/README.md); zero values leave them off.
	PartitionExpiration    time.Duration
	RequirePartitionFilter bool
}

// Writer implements warehouse.Writer on a BigQuery table.
type Writer struct {
	client  *bigquery.Client
	table   *bigquery.Table
	links   *bigquery.Table // LinksTable
	schema  bigquery.Schema
	cfg     Config
	now     func() time.Time
	timeout time.Duration
}

var _ warehouse.Writer = (*Writer)(nil)

// Schema returns the events table schema, parsed from schema/bigquery/events.json.
func Schema() (bigquery.Schema, error) {
	s, err := bigquery.SchemaFromJSON(bqschema.EventsJSON)
	if err != nil {
		return nil, fmt.Errorf("parse schema/bigquery/events.json: %w", err)
	}
	return s, nil
}

// LinksSchema returns the identity_links table schema, parsed from
// schema/bigquery/identity_links.json.
func LinksSchema() (bigquery.Schema, error) {
	s, err := bigquery.SchemaFromJSON(bqschema.IdentityLinksJSON)
	if err != nil {
		return nil, fmt.Errorf("parse schema/bigquery/identity_links.json: %w", err)
	}
	return s, nil
}

// New connects a BigQuery client for cfg.Project. It makes no API call: use Check or EnsureTable
// to reach the table.
func New(ctx context.Context, cfg Config) (*Writer, error) {
	if cfg.Project == "" {
		return nil, fmt.Errorf("bigquery: project is required: %w", errs.ErrInvalid)
	}
	if cfg.Dataset == "" {
		return nil, fmt.Errorf("bigquery: dataset is required: %w", errs.ErrInvalid)
	}
	if cfg.Table == "" {
		cfg.Table = DefaultTable
	}
	schema, err := Schema()
	if err != nil {
		return nil, err
	}
	client, err := bigquery.NewClient(ctx, cfg.Project, cfg.ClientOptions...)
	if err != nil {
		return nil, fmt.Errorf("bigquery: new client: %w", err)
	}
	w := &Writer{
		client:  client,
		table:   client.Dataset(cfg.Dataset).Table(cfg.Table),
		links:   client.Dataset(cfg.Dataset).Table(LinksTable),
		schema:  schema,
		cfg:     cfg,
		now:     cfg.Now,
		timeout: cfg.RequestTimeout,
	}
	if w.now == nil {
		w.now = time.Now
	}
	if w.timeout <= 0 {
		w.timeout = DefaultRequestTimeout
	}
	return w, nil
}

// Name is the technology, the key of the ingestion health check.
func (w *Writer) Name() string { return "bigquery" }

// Close releases the client.
func (w *Writer) Close() error { return w.client.Close() }

// TableID is the table as "project.dataset.table".
func (w *Writer) TableID() string {
	return w.cfg.Project + "." + w.cfg.Dataset + "." + w.cfg.Table
}

// Check reports whether the table's metadata can be read: credentials, dataset and table are in
// place. A missing table matches errs.ErrNotFound, an unreachable service errs.ErrUnavailable.
func (w *Writer) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	if _, err := w.table.Metadata(ctx, bigquery.WithMetadataView(bigquery.BasicMetadataView)); err != nil {
		return fmt.Errorf("bigquery: table %s: %w", w.TableID(), classify(err))
	}
	return nil
}

// EnsureTable creates the table with the events schema, DAY partitioning on occurred_at and
// clustering on tenant_id, event_type, user_id when it does not exist, and the identity_links
// table (clustered on tenant_id, anonymous_id) beside it. It leaves an existing table as it is (it
// does not compare schemas), and a table created concurrently by another worker counts as
// success. The dataset must exist.
func (w *Writer) EnsureTable(ctx context.Context) error {
	if err := w.ensureEvents(ctx); err != nil {
		return err
	}
	return w.ensureLinks(ctx)
}

func (w *Writer) ensureLinks(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	_, err := w.links.Metadata(ctx, bigquery.WithMetadataView(bigquery.BasicMetadataView))
	if err == nil {
		return nil
	}
	id := w.cfg.Project + "." + w.cfg.Dataset + "." + LinksTable
	if !isStatus(err, http.StatusNotFound) {
		return fmt.Errorf("bigquery: table %s: %w", id, classify(err))
	}
	schema, err := LinksSchema()
	if err != nil {
		return err
	}
	md := &bigquery.TableMetadata{
		Description: "Cohort identity graph: ids linked to users (written by the event loader)",
		Schema:      schema,
		Clustering:  &bigquery.Clustering{Fields: []string{"tenant_id", "anonymous_id"}},
	}
	if err := w.links.Create(ctx, md); err != nil && !isStatus(err, http.StatusConflict) {
		return fmt.Errorf("bigquery: create table %s: %w", id, classify(err))
	}
	return nil
}

func (w *Writer) ensureEvents(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	_, err := w.table.Metadata(ctx, bigquery.WithMetadataView(bigquery.BasicMetadataView))
	if err == nil {
		return nil
	}
	if !isStatus(err, http.StatusNotFound) {
		return fmt.Errorf("bigquery: table %s: %w", w.TableID(), classify(err))
	}
	md := &bigquery.TableMetadata{
		Description: "Cohort events (written by the event loader)",
		Schema:      w.schema,
		TimePartitioning: &bigquery.TimePartitioning{
			Type:       bigquery.DayPartitioningType,
			Field:      PartitionField,
			Expiration: w.cfg.PartitionExpiration,
		},
		Clustering:             &bigquery.Clustering{Fields: append([]string(nil), ClusteringFields...)},
		RequirePartitionFilter: w.cfg.RequirePartitionFilter,
	}
	if err := w.table.Create(ctx, md); err != nil && !isStatus(err, http.StatusConflict) {
		return fmt.Errorf("bigquery: create table %s: %w", w.TableID(), classify(err))
	}
	return nil
}

// Write streams events into the table, one row per event, in requests of at most
// MaxRowsPerRequest rows and MaxBytesPerRequest bytes, sent one after another.
//
// It returns the number of rows sent, not the number of new events: BigQuery does not say which
// rows its insertId dedupe dropped. On error it returns the rows of the requests that were accepted
// before the failing one. Any failure, including one row of a request, is an error, and the caller
// retries the whole batch (the loader nacks it); rows that did land are deduped by insertId on the
// retry. An event whose payload is not valid JSON fails the batch before anything is sent.
func (w *Writer) Write(ctx context.Context, events []warehouse.Event) (int, error) {
	if len(events) == 0 {
		return 0, nil
	}
	rows := make([]*row, len(events))
	for i, e := range events {
		r, err := w.newRow(e)
		if err != nil {
			return 0, err
		}
		rows[i] = r
	}
	sent := 0
	for _, c := range chunk(rows, MaxRowsPerRequest, MaxBytesPerRequest) {
		if err := w.put(ctx, c); err != nil {
			return sent, err
		}
		sent += len(c)
	}
	return sent, nil
}

// WriteLinks streams new identity links into the identity_links table, insertId
// "<tenant_id>:<anonymous_id>" (an id links once, so a retried write is deduplicated like an
// event). Any failure is an error: the loader then retries the batch that made the links.
func (w *Writer) WriteLinks(ctx context.Context, links []identity.Link) error {
	for start := 0; start < len(links); start += MaxRowsPerRequest {
		chunk := links[start:min(start+MaxRowsPerRequest, len(links))]
		savers := make([]bigquery.ValueSaver, len(chunk))
		for i, l := range chunk {
			savers[i] = linkRow(l)
		}
		ctx, cancel := context.WithTimeout(ctx, w.timeout)
		err := w.links.Inserter().Put(ctx, savers)
		cancel()
		if err != nil {
			return fmt.Errorf("bigquery: insert %d links into %s.%s.%s: %w", len(chunk), w.cfg.Project, w.cfg.Dataset, LinksTable, classify(err))
		}
	}
	return nil
}

// linkRow is one identity_links row, a bigquery.ValueSaver.
type linkRow identity.Link

func (l linkRow) Save() (map[string]bigquery.Value, string, error) {
	return map[string]bigquery.Value{
		"tenant_id":    l.TenantID,
		"anonymous_id": l.ID,
		"user_id":      l.UserID,
		"source":       l.Source,
		"linked_at":    timestamp(l.LinkedAt),
	}, strconv.FormatInt(l.TenantID, 10) + ":" + l.ID, nil
}

func (w *Writer) put(ctx context.Context, rows []*row) error {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	savers := make([]bigquery.ValueSaver, len(rows))
	for i, r := range rows {
		savers[i] = r
	}
	err := w.table.Inserter().Put(ctx, savers)
	if err == nil {
		return nil
	}
	var pme bigquery.PutMultiError
	if errors.As(err, &pme) && len(pme) > 0 {
		return rowError(pme, rows)
	}
	return fmt.Errorf("bigquery: insert %d rows into %s: %w", len(rows), w.TableID(), classify(err))
}

// RowError is a request that BigQuery refused because of one or more of its rows. It names the
// first row rejected for a reason of its own: when one row of a request is invalid BigQuery inserts
// none of them and reports the others with reason "stopped".
type RowError struct {
	TenantID int64
	EventID  string
	Reason   string // BigQuery's reason, for example "invalid"
	Message  string
	Rejected int // rows of the request BigQuery reported, the named one included
	Rows     int // rows in the request
	Err      bigquery.PutMultiError
}

func (e *RowError) Error() string {
	more := ""
	if e.Rejected > 1 {
		more = fmt.Sprintf(" (%d of %d rows in the request rejected)", e.Rejected, e.Rows)
	}
	return fmt.Sprintf("bigquery: insert event %q of tenant %d: %s: %s%s", e.EventID, e.TenantID, e.Reason, e.Message, more)
}

func (e *RowError) Unwrap() error { return e.Err }

func rowError(pme bigquery.PutMultiError, rows []*row) *RowError {
	sorted := append(bigquery.PutMultiError(nil), pme...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].RowIndex < sorted[j].RowIndex })
	first := sorted[0]
	for _, rie := range sorted {
		if reason, _ := rowReason(rie); reason != "stopped" {
			first = rie
			break
		}
	}
	re := &RowError{EventID: first.InsertID, Rejected: len(pme), Rows: len(rows), Err: pme}
	if first.RowIndex >= 0 && first.RowIndex < len(rows) {
		re.TenantID, re.EventID = rows[first.RowIndex].tenantID, rows[first.RowIndex].eventID
	}
	re.Reason, re.Message = rowReason(first)
	return re
}

func rowReason(rie bigquery.RowInsertionError) (reason, message string) {
	for _, e := range rie.Errors {
		var be *bigquery.Error
		if errors.As(e, &be) {
			return be.Reason, be.Message
		}
		return "error", e.Error()
	}
	return "error", "rejected without a reason"
}

// classify adds the errs sentinel that matches a transport or API error: 404 -> ErrNotFound,
// 5xx, 429 and network failures -> ErrUnavailable.
func classify(err error) error {
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		switch {
		case ge.Code == http.StatusNotFound:
			return fmt.Errorf("%w: %w", errs.ErrNotFound, err)
		case ge.Code == http.StatusTooManyRequests || ge.Code >= 500:
			return fmt.Errorf("%w: %w", errs.ErrUnavailable, err)
		}
		return err
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", errs.ErrUnavailable, err)
	}
	return err
}

func isStatus(err error, code int) bool {
	var ge *googleapi.Error
	return errors.As(err, &ge) && ge.Code == code
}

// row is one events row, a bigquery.ValueSaver.
type row struct {
	tenantID int64
	eventID  string
	insertID string
	values   map[string]bigquery.Value
	size     int // bytes of the row in the insertAll body
}

func (r *row) Save() (map[string]bigquery.Value, string, error) {
	return r.values, r.insertID, nil
}

func (w *Writer) newRow(e warehouse.Event) (*row, error) {
	payload := "{}"
	if len(e.Payload) > 0 {
		if !json.Valid(e.Payload) {
			return nil, fmt.Errorf("bigquery: event %q of tenant %d: payload is not valid JSON: %w", e.EventID, e.TenantID, errs.ErrInvalid)
		}
		payload = string(e.Payload)
	}
	received := e.ReceivedAt
	if received.IsZero() {
		received = w.now()
	}
	r := &row{
		tenantID: e.TenantID,
		eventID:  e.EventID,
		insertID: strconv.FormatInt(e.TenantID, 10) + ":" + e.EventID,
		values: map[string]bigquery.Value{
			"tenant_id":   e.TenantID,
			"event_id":    e.EventID,
			"user_id":     e.UserID,
			"event_type":  e.EventType,
			"occurred_at": timestamp(e.OccurredAt),
			"received_at": timestamp(received),
			// A JSON column takes its value as a string holding the JSON text.
			"payload": payload,
		},
	}
	if e.AnonymousID != "" { // NULLABLE: absent for an event that carried none
		r.values["anonymous_id"] = e.AnonymousID
	}
	// The same encoding the client uses for the request body (encoding/json of insertId and json).
	b, err := json.Marshal(struct {
		InsertID string                    `json:"insertId"`
		JSON     map[string]bigquery.Value `json:"json"`
	}{r.insertID, r.values})
	if err != nil {
		return nil, fmt.Errorf("bigquery: encode event %q of tenant %d: %w", e.EventID, e.TenantID, err)
	}
	r.size = len(b) + 1 // and the comma between rows
	return r, nil
}

// timestamp is t in UTC at BigQuery's microsecond precision; the client sends it as RFC 3339.
func timestamp(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// chunk splits rows into consecutive groups of at most maxRows rows and maxBytes bytes. A row
// larger than maxBytes on its own goes alone, and BigQuery decides.
func chunk(rows []*row, maxRows, maxBytes int) [][]*row {
	var out [][]*row
	start, size := 0, requestOverhead
	for i, r := range rows {
		if i > start && (i-start == maxRows || size+r.size > maxBytes) {
			out = append(out, rows[start:i])
			start, size = i, requestOverhead
		}
		size += r.size
	}
	return append(out, rows[start:])
}
