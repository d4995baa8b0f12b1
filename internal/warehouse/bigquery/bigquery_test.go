package bigquery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigquery"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"

	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/identity"
	"github.com/cohort-dev/cohort/internal/warehouse"
)

const (
	testProject = "cohort-test"
	testDataset = "cohort"
)

// newTestWriter returns a Writer whose real BigQuery client talks to f.
func newTestWriter(t *testing.T, f *fakeBigQuery, edit func(*Config)) *Writer {
	t.Helper()
	cfg := Config{
		Project: testProject,
		Dataset: testDataset,
		ClientOptions: []option.ClientOption{
			option.WithEndpoint(f.srv.URL),
			option.WithoutAuthentication(),
		},
		Now:            func() time.Time { return time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC) },
		RequestTimeout: 10 * time.Second,
	}
	if edit != nil {
		edit(&cfg)
	}
	w, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("new: %v", err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w
}

// newTable starts a fake with the events table in place and a Writer on it.
func newTable(t *testing.T, edit func(*Config)) (*fakeBigQuery, *Writer) {
	t.Helper()
	f := newFakeBigQuery(t, testProject, testDataset)
	f.createTable(testProject, testDataset, DefaultTable)
	return f, newTestWriter(t, f, edit)
}

func event(tenant int64, id string) warehouse.Event {
	return warehouse.Event{
		TenantID:   tenant,
		EventID:    id,
		UserID:     "user-" + id,
		EventType:  "page_view",
		OccurredAt: time.Date(2026, 4, 30, 9, 30, 0, 0, time.UTC),
		ReceivedAt: time.Date(2026, 4, 30, 9, 30, 1, 0, time.UTC),
		Payload:    json.RawMessage(`{"path":"/pricing"}`),
	}
}

func events(tenant int64, n int, prefix string) []warehouse.Event {
	out := make([]warehouse.Event, n)
	for i := range out {
		out[i] = event(tenant, fmt.Sprintf("%s%04d", prefix, i))
	}
	return out
}

func str(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("%s is not a JSON string: %v", raw, err)
	}
	return s
}

func TestName(t *testing.T) {
	_, w := newTable(t, nil)
	if got := w.Name(); got != "bigquery" {
		t.Fatalf("Name() = %q, want bigquery", got)
	}
}

func TestNewValidatesConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"missing project", Config{Dataset: "d"}},
		{"missing dataset", Config{Project: "p"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.ClientOptions = []option.ClientOption{option.WithoutAuthentication()}
			if _, err := New(context.Background(), tc.cfg); !errors.Is(err, errs.ErrInvalid) {
				t.Fatalf("New() error = %v, want errs.ErrInvalid", err)
			}
		})
	}
}

func TestSchemaMatchesEvent(t *testing.T) {
	schema, err := Schema()
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name     string
		typ      bigquery.FieldType
		required bool
	}{
		{"tenant_id", bigquery.IntegerFieldType, true},
		{"event_id", bigquery.StringFieldType, true},
		{"user_id", bigquery.StringFieldType, true},
		{"event_type", bigquery.StringFieldType, true},
		{"occurred_at", bigquery.TimestampFieldType, true},
		{"received_at", bigquery.TimestampFieldType, true},
		{"payload", bigquery.JSONFieldType, false},
		{"anonymous_id", bigquery.StringFieldType, false},
	}
	if len(schema) != len(want) {
		t.Fatalf("schema has %d fields, want %d", len(schema), len(want))
	}
	// The columns are warehouse.Event's, in order.
	ev := reflect.TypeOf(warehouse.Event{})
	for i, w := range want {
		f := schema[i]
		if f.Name != w.name || f.Type != w.typ || f.Required != w.required {
			t.Errorf("field %d = %s %s required=%v, want %s %s required=%v", i, f.Name, f.Type, f.Required, w.name, w.typ, w.required)
		}
		if tag := strings.Split(ev.Field(i).Tag.Get("json"), ",")[0]; tag != f.Name {
			t.Errorf("field %d is %s, warehouse.Event has %s", i, f.Name, tag)
		}
	}
}

func TestWriteRows(t *testing.T) {
	cest := time.FixedZone("CEST", 2*60*60)
	for _, tc := range []struct {
		name  string
		event warehouse.Event
		// want is the row as the client sent it: raw JSON per column.
		want        map[string]string
		wantPayload string
	}{
		{
			name:  "plain event",
			event: event(7, "evt-1"),
			want: map[string]string{
				"tenant_id":   `7`,
				"event_id":    `"evt-1"`,
				"user_id":     `"user-evt-1"`,
				"event_type":  `"page_view"`,
				"occurred_at": `"2026-04-30T09:30:00Z"`,
				"received_at": `"2026-04-30T09:30:01Z"`,
			},
			wantPayload: `{"path":"/pricing"}`,
		},
		{
			name: "unicode, nested payload, sub-microsecond times in another zone",
			event: warehouse.Event{
				TenantID:   9007199254740993,
				EventID:    "msg-ü-東京",
				UserID:     "usér 🎉",
				EventType:  "order_completed",
				OccurredAt: time.Date(2026, 5, 1, 12, 0, 0, 123456789, cest),
				ReceivedAt: time.Date(2026, 5, 1, 10, 0, 1, 999999999, time.UTC),
				Payload:    json.RawMessage(`{"title":"Café — 東京 🎉","html":"<b>&amp;</b>","big":12345678901234567890,"nested":{"a":[1,2.5,true,null],"e":"\u00e9\n"}}`),
			},
			want: map[string]string{
				"tenant_id":   `9007199254740993`,
				"event_id":    `"msg-ü-東京"`,
				"user_id":     `"usér 🎉"`,
				"event_type":  `"order_completed"`,
				"occurred_at": `"2026-05-01T10:00:00.123456Z"`,
				"received_at": `"2026-05-01T10:00:01.999999Z"`,
			},
			wantPayload: `{"title":"Café — 東京 🎉","html":"<b>&amp;</b>","big":12345678901234567890,"nested":{"a":[1,2.5,true,null],"e":"\u00e9\n"}}`,
		},
		{
			name: "empty payload and zero received_at",
			event: warehouse.Event{
				TenantID: 1, EventID: "e", UserID: "u", EventType: "identify",
				OccurredAt: time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC),
			},
			want: map[string]string{
				"tenant_id":   `1`,
				"event_id":    `"e"`,
				"user_id":     `"u"`,
				"event_type":  `"identify"`,
				"occurred_at": `"2026-04-01T00:00:00Z"`,
				"received_at": `"2026-05-01T12:00:00Z"`, // Config.Now
			},
			wantPayload: `{}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, w := newTable(t, nil)
			n, err := w.Write(context.Background(), []warehouse.Event{tc.event})
			if err != nil {
				t.Fatalf("write: %v", err)
			}
			if n != 1 {
				t.Fatalf("write returned %d, want 1", n)
			}
			rows := f.rows(testProject, testDataset, DefaultTable)
			if len(rows) != 1 {
				t.Fatalf("stored %d rows, want 1", len(rows))
			}
			row := rows[0]
			if want := fmt.Sprintf("%d:%s", tc.event.TenantID, tc.event.EventID); row.InsertID != want {
				t.Errorf("insertId = %q, want %q", row.InsertID, want)
			}
			if len(row.JSON) != len(tc.want)+1 {
				t.Errorf("row has columns %v, want the 7 of the schema", keys(row.JSON))
			}
			for col, want := range tc.want {
				if got := string(row.JSON[col]); got != want {
					t.Errorf("%s = %s, want %s", col, got, want)
				}
			}
			// payload travels as a JSON string holding the JSON text, byte for byte.
			if got := str(t, row.JSON["payload"]); got != tc.wantPayload {
				t.Errorf("payload = %s, want %s", got, tc.wantPayload)
			}
		})
	}
}

func keys(m map[string]json.RawMessage) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestWriteChunks(t *testing.T) {
	big := func(n, size int) []warehouse.Event {
		out := events(3, n, "big-")
		for i := range out {
			out[i].Payload = json.RawMessage(`{"blob":"` + strings.Repeat("x", size) + `"}`)
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		events    []warehouse.Event
		wantSizes []int // rows per insertAll request
	}{
		{"empty batch sends nothing", nil, nil},
		{"one event", events(3, 1, "e"), []int{1}},
		{"exactly 500 events in one request", events(3, 500, "e"), []int{500}},
		{"1,200 events in three requests", events(3, 1200, "e"), []int{500, 500, 200}},
		{"1.5 MB payloads, five to a request", big(12, 1_500_000), []int{5, 5, 2}},
		{"4 MB payloads, two to a request", big(3, 4_000_000), []int{2, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, w := newTable(t, nil)
			n, err := w.Write(context.Background(), tc.events)
			if err != nil {
				t.Fatalf("write: %v", err)
			}
			if n != len(tc.events) {
				t.Errorf("write returned %d, want %d", n, len(tc.events))
			}
			reqs := f.requests("insertAll")
			var sizes []int
			for _, r := range reqs {
				sizes = append(sizes, r.Rows)
				if len(r.Body) > MaxBytesPerRequest {
					t.Errorf("request of %d rows is %d bytes, over %d", r.Rows, len(r.Body), MaxBytesPerRequest)
				}
			}
			if !reflect.DeepEqual(sizes, tc.wantSizes) {
				t.Errorf("rows per request = %v, want %v", sizes, tc.wantSizes)
			}
			rows := f.rows(testProject, testDataset, DefaultTable)
			if len(rows) != len(tc.events) {
				t.Fatalf("stored %d rows, want %d", len(rows), len(tc.events))
			}
			for i, r := range rows { // requests go one after another, in order
				if want := "3:" + tc.events[i].EventID; r.InsertID != want {
					t.Fatalf("row %d insertId = %q, want %q", i, r.InsertID, want)
				}
			}
		})
	}
}

func TestChunkBySize(t *testing.T) {
	mk := func(sizes ...int) []*row {
		out := make([]*row, len(sizes))
		for i, s := range sizes {
			out[i] = &row{size: s}
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		sizes    []int
		maxRows  int
		maxBytes int
		want     []int
	}{
		{"row limit", []int{1, 1, 1, 1, 1}, 2, 10_000, []int{2, 2, 1}},
		{"byte limit", []int{400, 400, 400}, 10, requestOverhead + 800, []int{2, 1}},
		{"oversized row goes alone", []int{10, 5000, 10}, 10, requestOverhead + 100, []int{1, 1, 1}},
		{"first row oversized", []int{5000, 10, 10}, 10, requestOverhead + 100, []int{1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []int
			for _, c := range chunk(mk(tc.sizes...), tc.maxRows, tc.maxBytes) {
				got = append(got, len(c))
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("chunks = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestWriteRedelivery(t *testing.T) {
	for _, tc := range []struct {
		name       string
		batches    [][]warehouse.Event
		wantStored int
		wantIDs    []string
	}{
		{
			name:       "same batch delivered twice is stored once",
			batches:    [][]warehouse.Event{events(7, 3, "e"), events(7, 3, "e")},
			wantStored: 3,
			wantIDs:    []string{"7:e0000", "7:e0001", "7:e0002"},
		},
		{
			name:       "duplicate inside a batch is stored once",
			batches:    [][]warehouse.Event{{event(7, "a"), event(7, "b"), event(7, "a")}},
			wantStored: 2,
			wantIDs:    []string{"7:a", "7:b"},
		},
		{
			name:       "same event id in two tenants is two events",
			batches:    [][]warehouse.Event{{event(7, "a")}, {event(8, "a")}},
			wantStored: 2,
			wantIDs:    []string{"7:a", "8:a"},
		},
		{
			name:       "redelivery of a 1,200-event batch",
			batches:    [][]warehouse.Event{events(7, 1200, "e"), events(7, 1200, "e")},
			wantStored: 1200,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, w := newTable(t, nil)
			for i, b := range tc.batches {
				n, err := w.Write(context.Background(), b)
				if err != nil {
					t.Fatalf("write %d: %v", i, err)
				}
				if n != len(b) { // rows sent: BigQuery does not report its dedupe
					t.Errorf("write %d returned %d, want %d", i, n, len(b))
				}
			}
			rows := f.rows(testProject, testDataset, DefaultTable)
			if len(rows) != tc.wantStored {
				t.Fatalf("stored %d rows, want %d", len(rows), tc.wantStored)
			}
			if tc.wantIDs != nil {
				var ids []string
				for _, r := range rows {
					ids = append(ids, r.InsertID)
				}
				if !reflect.DeepEqual(ids, tc.wantIDs) {
					t.Errorf("stored insertIds %v, want %v", ids, tc.wantIDs)
				}
			}
		})
	}
}

func TestWriteErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		setup    func(f *fakeBigQuery)
		events   []warehouse.Event
		timeout  time.Duration
		noTable  bool
		wantN    int
		wantErr  []string // substrings of the error
		wantIs   error
		check    func(t *testing.T, err error)
		stored   int
		requests int // insertAll requests the fake saw
	}{
		{
			name:    "rejected row names its event",
			setup:   func(f *fakeBigQuery) { f.rejectRow("e0001", "invalid") },
			events:  events(7, 3, "e"),
			wantErr: []string{`"e0001"`, "tenant 7", "invalid", "3 of 3 rows"},
			check: func(t *testing.T, err error) {
				var re *RowError
				if !errors.As(err, &re) || re.EventID != "e0001" || re.TenantID != 7 || re.Reason != "invalid" {
					t.Errorf("error %#v is not a RowError for e0001", err)
				}
				var pme bigquery.PutMultiError
				if !errors.As(err, &pme) || len(pme) != 3 {
					t.Errorf("error does not wrap the PutMultiError of 3 rows: %v", err)
				}
			},
			stored:   0,
			requests: 1,
		},
		{
			name: "rejected row in the second request",
			setup: func(f *fakeBigQuery) {
				f.rejectRow("e0550", "invalid")
				f.rejectRow("e0560", "invalid")
			},
			events:   events(7, 1200, "e"),
			wantN:    500,
			wantErr:  []string{`"e0550"`, "invalid"},
			stored:   500, // the first request landed; the retry dedupes it on insertId
			requests: 2,
		},
		{
			name: "row BigQuery itself rejects",
			events: []warehouse.Event{event(7, "ok"), {
				TenantID: 7, EventID: "bad", UserID: "u", EventType: "t",
				OccurredAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
				ReceivedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
				Payload:    json.RawMessage(`{"ok":true}`),
			}},
			setup: func(f *fakeBigQuery) {
				// A table whose schema lacks the payload column.
				f.mu.Lock()
				ft := f.tables[testProject+"/"+testDataset+"/"+DefaultTable]
				ft.fields = ft.fields[:6]
				f.mu.Unlock()
			},
			wantErr:  []string{`"ok"`, "no such field: payload"},
			requests: 1,
		},
		{
			name:     "503 on every attempt",
			setup:    func(f *fakeBigQuery) { f.failAlways("insertAll", http.StatusServiceUnavailable) },
			events:   events(7, 3, "e"),
			timeout:  300 * time.Millisecond,
			wantIs:   errs.ErrUnavailable,
			wantErr:  []string{"insert 3 rows", "503"},
			check:    wantCode(http.StatusServiceUnavailable),
			requests: -1, // the client retries until the request timeout
		},
		{
			name:     "503 once, then the client's retry lands",
			setup:    func(f *fakeBigQuery) { f.fail("insertAll", http.StatusServiceUnavailable) },
			events:   events(7, 3, "e"),
			wantN:    3,
			stored:   3,
			requests: 2,
		},
		{
			name:     "400 is not retried",
			setup:    func(f *fakeBigQuery) { f.fail("insertAll", http.StatusBadRequest) },
			events:   events(7, 3, "e"),
			wantErr:  []string{"400"},
			check:    wantCode(http.StatusBadRequest),
			requests: 1,
		},
		{
			name:     "missing table",
			noTable:  true,
			events:   events(7, 3, "e"),
			wantIs:   errs.ErrNotFound,
			wantErr:  []string{"Not found: Table"},
			requests: 1,
		},
		{
			name: "payload that is not JSON fails before sending",
			events: func() []warehouse.Event {
				ev := events(7, 3, "e")
				ev[2].Payload = json.RawMessage(`{"a":`)
				return ev
			}(),
			wantIs:   errs.ErrInvalid,
			wantErr:  []string{`"e0002"`, "not valid JSON"},
			requests: 0,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeBigQuery(t, testProject, testDataset)
			if !tc.noTable {
				f.createTable(testProject, testDataset, DefaultTable)
			}
			if tc.setup != nil {
				tc.setup(f)
			}
			w := newTestWriter(t, f, func(c *Config) {
				if tc.timeout > 0 {
					c.RequestTimeout = tc.timeout
				}
			})
			start := time.Now()
			n, err := w.Write(context.Background(), tc.events)
			t.Logf("error: %v (after %v)", err, time.Since(start).Round(time.Millisecond))
			if tc.wantErr == nil && tc.wantIs == nil && tc.check == nil {
				if err != nil {
					t.Fatalf("write: %v", err)
				}
			} else if err == nil {
				t.Fatal("write succeeded, want an error")
			}
			if n != tc.wantN {
				t.Errorf("write returned %d, want %d", n, tc.wantN)
			}
			for _, s := range tc.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("error %v is not %v", err, tc.wantIs)
			}
			if tc.check != nil {
				tc.check(t, err)
			}
			if got := len(f.rows(testProject, testDataset, DefaultTable)); got != tc.stored {
				t.Errorf("stored %d rows, want %d", got, tc.stored)
			}
			got := len(f.requests("insertAll"))
			if tc.requests >= 0 && got != tc.requests {
				t.Errorf("fake saw %d insertAll requests, want %d", got, tc.requests)
			}
			if tc.requests < 0 && got < 1 {
				t.Errorf("fake saw no insertAll request")
			}
		})
	}
}

func wantCode(code int) func(t *testing.T, err error) {
	return func(t *testing.T, err error) {
		t.Helper()
		var ge *googleapi.Error
		if !errors.As(err, &ge) || ge.Code != code {
			t.Errorf("error %v does not wrap a googleapi.Error with code %d", err, code)
		}
	}
}

// posted is the table resource the client sent to tables.insert.
type posted struct {
	TableReference struct{ ProjectID, DatasetID, TableID string } `json:"tableReference"`
	Schema         struct {
		Fields []struct{ Name, Type, Mode string } `json:"fields"`
	} `json:"schema"`
	TimePartitioning struct {
		Type         string `json:"type"`
		Field        string `json:"field"`
		ExpirationMs string `json:"expirationMs"`
	} `json:"timePartitioning"`
	Clustering struct {
		Fields []string `json:"fields"`
	} `json:"clustering"`
	RequirePartitionFilter bool `json:"requirePartitionFilter"`
}

func TestEnsureTable(t *testing.T) {
	wantSchema := [][3]string{
		{"tenant_id", "INTEGER", "REQUIRED"},
		{"event_id", "STRING", "REQUIRED"},
		{"user_id", "STRING", "REQUIRED"},
		{"event_type", "STRING", "REQUIRED"},
		{"occurred_at", "TIMESTAMP", "REQUIRED"},
		{"received_at", "TIMESTAMP", "REQUIRED"},
		{"payload", "JSON", ""},
		{"anonymous_id", "STRING", ""},
	}
	for _, tc := range []struct {
		name        string
		exists      bool
		setup       func(f *fakeBigQuery)
		edit        func(*Config)
		wantCreate  bool
		wantExpMs   string
		wantReqPart bool
		wantErrIs   error
	}{
		{name: "creates the missing table", wantCreate: true},
		{
			name:        "creates with partition expiration and required partition filter",
			edit:        func(c *Config) { c.PartitionExpiration = 400 * 24 * time.Hour; c.RequirePartitionFilter = true },
			wantCreate:  true,
			wantExpMs:   "34560000000",
			wantReqPart: true,
		},
		{name: "no-op when the table exists", exists: true},
		{
			name:   "table created concurrently by another worker",
			exists: true,
			// tables.get still says 404, then tables.insert answers 409.
			setup: func(f *fakeBigQuery) { f.fail("tables.get", http.StatusNotFound) },
		},
		{
			name:      "dataset missing",
			setup:     func(f *fakeBigQuery) { f.datasets = map[string]bool{} },
			edit:      func(c *Config) { c.RequestTimeout = time.Second },
			wantErrIs: errs.ErrNotFound,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeBigQuery(t, testProject, testDataset)
			if tc.exists {
				f.createTable(testProject, testDataset, DefaultTable)
			}
			if tc.setup != nil {
				tc.setup(f)
			}
			w := newTestWriter(t, f, tc.edit)
			err := w.EnsureTable(context.Background())
			if tc.wantErrIs != nil {
				if !errors.Is(err, tc.wantErrIs) {
					t.Fatalf("EnsureTable() error = %v, want %v", err, tc.wantErrIs)
				}
				return
			}
			if err != nil {
				t.Fatalf("EnsureTable: %v", err)
			}
			inserts := forTable(f.requests("tables.insert"), DefaultTable)
			if !tc.wantCreate {
				if tc.setup == nil && len(inserts) != 0 {
					t.Fatalf("table existed, but the client sent %d tables.insert", len(inserts))
				}
				if got := len(forTable(f.requests("tables.get"), DefaultTable)); got != 1 {
					t.Errorf("tables.get sent %d times, want 1", got)
				}
				return
			}
			if len(inserts) != 1 {
				t.Fatalf("client sent %d tables.insert, want 1", len(inserts))
			}
			var p posted
			if err := json.Unmarshal(inserts[0].Body, &p); err != nil {
				t.Fatal(err)
			}
			if p.TableReference.TableID != "events" || p.TableReference.DatasetID != testDataset || p.TableReference.ProjectID != testProject {
				t.Errorf("tableReference = %+v", p.TableReference)
			}
			if p.TimePartitioning.Field != "occurred_at" || p.TimePartitioning.Type != "DAY" {
				t.Errorf("timePartitioning = %+v, want field occurred_at, type DAY", p.TimePartitioning)
			}
			if p.TimePartitioning.ExpirationMs != tc.wantExpMs {
				t.Errorf("timePartitioning.expirationMs = %q, want %q", p.TimePartitioning.ExpirationMs, tc.wantExpMs)
			}
			if p.RequirePartitionFilter != tc.wantReqPart {
				t.Errorf("requirePartitionFilter = %v, want %v", p.RequirePartitionFilter, tc.wantReqPart)
			}
			if want := []string{"tenant_id", "event_type", "user_id"}; !reflect.DeepEqual(p.Clustering.Fields, want) {
				t.Errorf("clustering.fields = %v, want %v", p.Clustering.Fields, want)
			}
			var got [][3]string
			for _, fl := range p.Schema.Fields {
				got = append(got, [3]string{fl.Name, fl.Type, fl.Mode})
			}
			if !reflect.DeepEqual(got, wantSchema) {
				t.Errorf("schema = %v, want %v", got, wantSchema)
			}

			// The table now exists: a second call is a no-op, and rows can be written.
			if err := w.EnsureTable(context.Background()); err != nil {
				t.Fatalf("second EnsureTable: %v", err)
			}
			if got := len(f.requests("tables.insert")); got != 2 {
				t.Errorf("second EnsureTable sent tables.insert again (%d in all, want events and identity_links once)", got)
			}
			if _, err := w.Write(context.Background(), []warehouse.Event{event(7, "first")}); err != nil {
				t.Fatalf("write into the created table: %v", err)
			}
			if err := w.Check(context.Background()); err != nil {
				t.Fatalf("check the created table: %v", err)
			}
		})
	}
}

// forTable keeps the requests about table (by path, or for tables.insert by the posted reference).
func forTable(reqs []fakeRequest, table string) []fakeRequest {
	var out []fakeRequest
	for _, r := range reqs {
		var p posted
		_ = json.Unmarshal(r.Body, &p)
		if strings.HasSuffix(r.Path, "/tables/"+table) || p.TableReference.TableID == table {
			out = append(out, r)
		}
	}
	return out
}

// TestLinks: EnsureTable creates identity_links beside events with its schema, and WriteLinks
// streams each link once per insertId (a retried write stores nothing twice).
func TestLinks(t *testing.T) {
	f := newFakeBigQuery(t, testProject, testDataset)
	f.createTable(testProject, testDataset, DefaultTable)
	w := newTestWriter(t, f, nil)
	if err := w.EnsureTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	inserts := forTable(f.requests("tables.insert"), LinksTable)
	if len(inserts) != 1 {
		t.Fatalf("tables.insert of %s sent %d times, want 1", LinksTable, len(inserts))
	}
	var p posted
	if err := json.Unmarshal(inserts[0].Body, &p); err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, fl := range p.Schema.Fields {
		cols = append(cols, fl.Name+" "+fl.Type+" "+fl.Mode)
	}
	if want := []string{"tenant_id INTEGER REQUIRED", "anonymous_id STRING REQUIRED", "user_id STRING REQUIRED", "source STRING REQUIRED", "linked_at TIMESTAMP REQUIRED"}; !reflect.DeepEqual(cols, want) {
		t.Errorf("identity_links schema %v, want %v", cols, want)
	}
	at := time.Date(2026, 5, 1, 12, 0, 0, 123456789, time.UTC)
	links := []identity.Link{
		{TenantID: 7, ID: "anon-1", UserID: "u1", Source: identity.SourceIdentify, LinkedAt: at},
		{TenantID: 7, ID: "prev-2", UserID: "u1", Source: identity.SourceAlias, LinkedAt: at},
	}
	for range 2 {
		if err := w.WriteLinks(context.Background(), links); err != nil {
			t.Fatalf("WriteLinks: %v", err)
		}
	}
	rows := f.rows(testProject, testDataset, LinksTable)
	if len(rows) != 2 {
		t.Fatalf("identity_links holds %d rows, want 2", len(rows))
	}
	r := rows[0]
	if r.InsertID != "7:anon-1" || string(r.JSON["anonymous_id"]) != `"anon-1"` || string(r.JSON["user_id"]) != `"u1"` ||
		string(r.JSON["source"]) != `"identify"` || string(r.JSON["linked_at"]) != `"2026-05-01T12:00:00.123456Z"` || string(r.JSON["tenant_id"]) != `7` {
		t.Errorf("row %s %v", r.InsertID, r.JSON)
	}
	// An event's anonymous id is written; none is left out (NULL).
	e := event(7, "anon")
	e.AnonymousID = "anon-1"
	if _, err := w.Write(context.Background(), []warehouse.Event{e, event(7, "plain")}); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range f.rows(testProject, testDataset, DefaultTable) {
		got[r.InsertID] = string(r.JSON["anonymous_id"])
	}
	if got["7:anon"] != `"anon-1"` || got["7:plain"] != "" {
		t.Errorf("anonymous_id columns %v, want anon-1 and none", got)
	}
	f.failAlways("insertAll", http.StatusServiceUnavailable)
	if err := w.WriteLinks(context.Background(), links); !errors.Is(err, errs.ErrUnavailable) {
		t.Errorf("WriteLinks with BigQuery down: %v, want unavailable", err)
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name   string
		exists bool
		setup  func(f *fakeBigQuery)
		table  string
		wantIs error
	}{
		{name: "table exists", exists: true},
		{name: "custom table name", exists: true, table: "events_v2"},
		{name: "table missing", wantIs: errs.ErrNotFound},
		{name: "service unavailable", exists: true, setup: func(f *fakeBigQuery) { f.failAlways("tables.get", http.StatusServiceUnavailable) }, wantIs: errs.ErrUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeBigQuery(t, testProject, testDataset)
			table := tc.table
			if table == "" {
				table = DefaultTable
			}
			if tc.exists {
				f.createTable(testProject, testDataset, table)
			}
			if tc.setup != nil {
				tc.setup(f)
			}
			w := newTestWriter(t, f, func(c *Config) { c.Table = tc.table; c.RequestTimeout = 300 * time.Millisecond })
			err := w.Check(context.Background())
			if tc.wantIs == nil {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if !errors.Is(err, tc.wantIs) {
				t.Fatalf("Check() error = %v, want %v", err, tc.wantIs)
			}
			if !strings.Contains(err.Error(), testProject+"."+testDataset+"."+table) {
				t.Errorf("error %q does not name the table", err)
			}
		})
	}
}
