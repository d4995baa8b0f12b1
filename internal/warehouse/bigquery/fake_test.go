package bigquery

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	bqschema "github.com/cohort-dev/cohort/schema/bigquery"
)

// fakeBigQuery is a loopback server that speaks the parts of the BigQuery v2 REST API the adapter
// uses — tables.get, tables.insert and tabledata.insertAll — so the real
// cloud.google.com/go/bigquery client runs against it. It keeps tables and rows in memory,
// validates rows against the table schema like BigQuery does (an invalid row stops the whole
// request unless skipInvalidRows), dedupes rows on insertId, and can be told to fail.
type fakeBigQuery struct {
	t   *testing.T
	srv *httptest.Server

	mu        sync.Mutex
	tables    map[string]*fakeTable // "project/dataset/table"
	datasets  map[string]bool       // "project/dataset"
	log       []fakeRequest
	failures  map[string][]int  // op -> HTTP status of the next requests; see fail
	failAll   map[string]int    // op -> HTTP status of every request
	rowErrors map[string]string // event_id -> insertErrors reason
}

type fakeTable struct {
	resource map[string]any // as posted by tables.insert, plus what the server adds
	fields   []fakeField
	rows     []fakeRow
	seen     map[string]bool // insertIds stored
}

type fakeField struct{ Name, Type, Mode string }

type fakeRow struct {
	InsertID string
	JSON     map[string]json.RawMessage
}

// fakeRequest is one request as the fake received it.
type fakeRequest struct {
	Op     string // "tables.get", "tables.insert", "insertAll"
	Method string
	Path   string
	Body   []byte
	Rows   int // insertAll: rows in the request
}

var fakePath = regexp.MustCompile(`^/(?:bigquery/v2/)?projects/([^/]+)/datasets/([^/]+)/tables(?:/([^/]+?))?(/insertAll)?$`)

func newFakeBigQuery(t *testing.T, project, dataset string) *fakeBigQuery {
	t.Helper()
	f := &fakeBigQuery{
		t:         t,
		tables:    map[string]*fakeTable{},
		datasets:  map[string]bool{project + "/" + dataset: true},
		failures:  map[string][]int{},
		failAll:   map[string]int{},
		rowErrors: map[string]string{},
	}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// fail makes the next len(codes) requests of op answer with those HTTP statuses.
func (f *fakeBigQuery) fail(op string, codes ...int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures[op] = append(f.failures[op], codes...)
}

// failAlways makes every request of op answer with code.
func (f *fakeBigQuery) failAlways(op string, code int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failAll[op] = code
}

// rejectRow makes insertAll report the row whose event_id is eventID with reason.
func (f *fakeBigQuery) rejectRow(eventID, reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rowErrors[eventID] = reason
}

// createTable creates a table with schema/bigquery/events.json, as `bq mk` would.
func (f *fakeBigQuery) createTable(project, dataset, table string) {
	f.t.Helper()
	var schema []map[string]any
	if err := json.Unmarshal(bqschema.EventsJSON, &schema); err != nil {
		f.t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.putTable(project, dataset, table, map[string]any{
		"schema":           map[string]any{"fields": schema},
		"timePartitioning": map[string]any{"type": "DAY", "field": "occurred_at"},
		"clustering":       map[string]any{"fields": []string{"tenant_id", "event_type", "user_id"}},
	})
}

func (f *fakeBigQuery) putTable(project, dataset, table string, res map[string]any) {
	res["kind"] = "bigquery#table"
	res["id"] = project + ":" + dataset + "." + table
	res["type"] = "TABLE"
	res["tableReference"] = map[string]any{"projectId": project, "datasetId": dataset, "tableId": table}
	res["creationTime"] = strconv.FormatInt(time.Now().UnixMilli(), 10)
	ft := &fakeTable{resource: res, seen: map[string]bool{}}
	if s, ok := res["schema"].(map[string]any); ok {
		b, _ := json.Marshal(s["fields"])
		var fields []struct{ Name, Type, Mode string }
		_ = json.Unmarshal(b, &fields)
		for _, fl := range fields {
			ft.fields = append(ft.fields, fakeField(fl))
		}
	}
	f.tables[project+"/"+dataset+"/"+table] = ft
}

// rows returns the rows stored in a table.
func (f *fakeBigQuery) rows(project, dataset, table string) []fakeRow {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ft := f.tables[project+"/"+dataset+"/"+table]; ft != nil {
		return append([]fakeRow(nil), ft.rows...)
	}
	return nil
}

// requests returns the requests received of op ("" for all).
func (f *fakeBigQuery) requests(op string) []fakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeRequest
	for _, r := range f.log {
		if op == "" || r.Op == op {
			out = append(out, r)
		}
	}
	return out
}

func (f *fakeBigQuery) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid", err.Error())
		return
	}
	m := fakePath.FindStringSubmatch(r.URL.Path)
	op := ""
	switch {
	case m == nil:
	case m[4] != "" && r.Method == http.MethodPost:
		op = "insertAll"
	case m[3] != "" && m[4] == "" && r.Method == http.MethodGet:
		op = "tables.get"
	case m[3] == "" && r.Method == http.MethodPost:
		op = "tables.insert"
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	req := fakeRequest{Op: op, Method: r.Method, Path: r.URL.Path, Body: body}
	defer func() { f.log = append(f.log, req) }()
	f.t.Logf("fake bigquery: %s %s (%d bytes)", r.Method, r.URL.RequestURI(), len(body))
	if op == "" {
		writeError(w, http.StatusNotFound, "notFound", "fake bigquery: no route for "+r.Method+" "+r.URL.Path)
		return
	}
	if code := f.failAll[op]; code != 0 {
		writeError(w, code, reasonFor(code), "fake bigquery: injected failure")
		return
	}
	if q := f.failures[op]; len(q) > 0 {
		f.failures[op] = q[1:]
		writeError(w, q[0], reasonFor(q[0]), "fake bigquery: injected failure")
		return
	}
	project, dataset, table := m[1], m[2], m[3]
	if !f.datasets[project+"/"+dataset] {
		writeError(w, http.StatusNotFound, "notFound", fmt.Sprintf("Not found: Dataset %s:%s", project, dataset))
		return
	}
	switch op {
	case "tables.get":
		ft := f.tables[project+"/"+dataset+"/"+table]
		if ft == nil {
			writeError(w, http.StatusNotFound, "notFound", fmt.Sprintf("Not found: Table %s:%s.%s", project, dataset, table))
			return
		}
		writeJSON(w, http.StatusOK, ft.resource)
	case "tables.insert":
		var res map[string]any
		if err := json.Unmarshal(body, &res); err != nil {
			writeError(w, http.StatusBadRequest, "invalid", err.Error())
			return
		}
		ref, _ := res["tableReference"].(map[string]any)
		id, _ := ref["tableId"].(string)
		if id == "" {
			writeError(w, http.StatusBadRequest, "invalid", "tableReference.tableId is required")
			return
		}
		if f.tables[project+"/"+dataset+"/"+id] != nil {
			writeError(w, http.StatusConflict, "duplicate", fmt.Sprintf("Already Exists: Table %s:%s.%s", project, dataset, id))
			return
		}
		f.putTable(project, dataset, id, res)
		writeJSON(w, http.StatusOK, res)
	case "insertAll":
		ft := f.tables[project+"/"+dataset+"/"+table]
		if ft == nil {
			writeError(w, http.StatusNotFound, "notFound", fmt.Sprintf("Not found: Table %s:%s.%s", project, dataset, table))
			return
		}
		var in struct {
			Rows []struct {
				InsertID string                     `json:"insertId"`
				JSON     map[string]json.RawMessage `json:"json"`
			} `json:"rows"`
			SkipInvalidRows     bool `json:"skipInvalidRows"`
			IgnoreUnknownValues bool `json:"ignoreUnknownValues"`
		}
		if err := json.Unmarshal(body, &in); err != nil {
			writeError(w, http.StatusBadRequest, "invalid", err.Error())
			return
		}
		req.Rows = len(in.Rows)
		type rowErr struct {
			Index  int              `json:"index"`
			Errors []map[string]any `json:"errors"`
		}
		var insertErrors []rowErr
		bad := map[int]bool{}
		for i, row := range in.Rows {
			reason, msg := ft.validate(row.JSON, in.IgnoreUnknownValues)
			if reason == "" {
				var id string
				_ = json.Unmarshal(row.JSON["event_id"], &id)
				if rr := f.rowErrors[id]; rr != "" {
					reason, msg = rr, "fake bigquery: injected row error"
				}
			}
			if reason != "" {
				bad[i] = true
				insertErrors = append(insertErrors, rowErr{Index: i, Errors: []map[string]any{{"reason": reason, "location": "", "message": msg}}})
			}
		}
		if len(bad) > 0 && !in.SkipInvalidRows {
			// BigQuery inserts none of the rows and reports the valid ones as stopped.
			for i := range in.Rows {
				if !bad[i] {
					insertErrors = append(insertErrors, rowErr{Index: i, Errors: []map[string]any{{"reason": "stopped", "location": "", "message": ""}}})
				}
			}
		} else {
			for i, row := range in.Rows {
				if bad[i] || (row.InsertID != "" && ft.seen[row.InsertID]) {
					continue
				}
				if row.InsertID != "" {
					ft.seen[row.InsertID] = true
				}
				ft.rows = append(ft.rows, fakeRow{InsertID: row.InsertID, JSON: row.JSON})
			}
		}
		out := map[string]any{"kind": "bigquery#tableDataInsertAllResponse"}
		if len(insertErrors) > 0 {
			out["insertErrors"] = insertErrors
		}
		writeJSON(w, http.StatusOK, out)
	}
}

// validate checks a row against the table schema and returns BigQuery's reason and message for
// the first problem, or "" when the row is valid.
func (ft *fakeTable) validate(row map[string]json.RawMessage, ignoreUnknown bool) (reason, msg string) {
	known := map[string]bool{}
	for _, fl := range ft.fields {
		known[fl.Name] = true
		v, ok := row[fl.Name]
		if !ok || string(v) == "null" {
			if fl.Mode == "REQUIRED" {
				return "invalid", "Missing required field: " + fl.Name + "."
			}
			continue
		}
		if !validValue(fl.Type, v) {
			return "invalid", fmt.Sprintf("Cannot convert value %s to %s for field %s.", truncate(string(v)), fl.Type, fl.Name)
		}
	}
	if !ignoreUnknown {
		for name := range row {
			if !known[name] {
				return "invalid", "no such field: " + name + "."
			}
		}
	}
	return "", ""
}

func validValue(typ string, v json.RawMessage) bool {
	var s string
	isString := json.Unmarshal(v, &s) == nil
	switch typ {
	case "INTEGER", "INT64":
		if isString {
			_, err := strconv.ParseInt(s, 10, 64)
			return err == nil
		}
		_, err := strconv.ParseInt(string(v), 10, 64)
		return err == nil
	case "STRING":
		return isString
	case "TIMESTAMP":
		if !isString {
			_, err := strconv.ParseFloat(string(v), 64)
			return err == nil
		}
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999 MST", "2006-01-02 15:04:05.999999"} {
			if _, err := time.Parse(layout, s); err == nil {
				return true
			}
		}
		return false
	case "JSON":
		if isString {
			return json.Valid([]byte(s))
		}
		return json.Valid(v)
	}
	return true
}

func reasonFor(code int) string {
	switch code {
	case http.StatusNotFound:
		return "notFound"
	case http.StatusConflict:
		return "duplicate"
	case http.StatusTooManyRequests:
		return "rateLimitExceeded"
	case http.StatusInternalServerError, http.StatusServiceUnavailable:
		return "backendError"
	}
	return "invalid"
}

func writeError(w http.ResponseWriter, code int, reason, msg string) {
	writeJSON(w, code, map[string]any{"error": map[string]any{
		"code":    code,
		"message": msg,
		"errors":  []map[string]any{{"reason": reason, "message": msg, "domain": "global"}},
		"status":  strings.ToUpper(strings.ReplaceAll(http.StatusText(code), " ", "_")),
	}})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
