package bigquery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"

	"github.com/cohort-dev/cohort/internal/segment"
)

// queryFake is a loopback server speaking the two BigQuery v2 REST calls that
// cloud.google.com/go/bigquery (v1.77.0) makes for Query.Read when the query has no
// destination table, job id or other jobs.insert-only settings:
//
//   - jobs.query (POST /projects/{project}/queries), the "fast path": the answer carries the job
//     reference and, when the job is complete, the schema, totalRows and the first page of rows;
//   - jobs.getQueryResults (GET /projects/{project}/queries/{jobId}): polled with maxResults=0
//     while the job is incomplete, and used to read the pages after the first, and the first
//     page itself when jobs.query sent no rows (BigQuery leaves "rows" out of an empty result).
//
// Every request is logged; any other request fails the test.
type queryFake struct {
	t   *testing.T
	srv *httptest.Server
	// report fails the test on a request the fake cannot answer (t.Errorf).
	report func(format string, args ...any)

	mu      sync.Mutex
	answers []*queryAnswer          // answers of the next jobs.query calls, in order
	jobs    map[string]*queryAnswer // jobId -> the answer of the job
	reqs    []queryRequest
	seq     int
}

// queryAnswer is the result of one query job.
type queryAnswer struct {
	status     int           // non-zero: jobs.query fails with this HTTP status
	pending    int           // responses answering jobComplete:false, jobs.query's first
	columns    []queryColumn // result schema
	rows       [][]any       // cells: string, or nil for NULL
	pageSize   int           // >0: rows are served in pages of this size
	pageStatus int           // non-zero: getQueryResults reading rows fails with this status
}

type queryColumn struct{ Name, Type string }

// queryRequest is one request as the fake received it.
type queryRequest struct {
	Op     string // "jobs.query", "jobs.getQueryResults" or "" (unknown)
	Method string
	URI    string
	Body   []byte
}

var queryPath = regexp.MustCompile(`^/(?:bigquery/v2/)?projects/([^/]+)/queries(?:/([^/]+))?$`)

func newQueryFake(t *testing.T) *queryFake {
	t.Helper()
	f := &queryFake{t: t, report: t.Errorf, jobs: map[string]*queryAnswer{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// answer queues the answers of the next jobs.query calls.
func (f *queryFake) answer(as ...*queryAnswer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers = append(f.answers, as...)
}

// requests returns the requests received of op ("" for all).
func (f *queryFake) requests(op string) []queryRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []queryRequest
	for _, r := range f.reqs {
		if op == "" || r.Op == op {
			out = append(out, r)
		}
	}
	return out
}

// ops returns the operations received, in order.
func (f *queryFake) ops() []string {
	var out []string
	for _, r := range f.requests("") {
		out = append(out, r.Op)
	}
	return out
}

// sentQueries decodes the bodies of the jobs.query requests.
func (f *queryFake) sentQueries() []sentQuery {
	f.t.Helper()
	var out []sentQuery
	for _, r := range f.requests("jobs.query") {
		var q sentQuery
		if err := json.Unmarshal(r.Body, &q); err != nil {
			f.t.Fatalf("jobs.query body %s: %v", r.Body, err)
		}
		out = append(out, q)
	}
	return out
}

func (f *queryFake) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid", err.Error())
		return
	}
	m := queryPath.FindStringSubmatch(r.URL.Path)
	op := ""
	switch {
	case m == nil:
	case m[2] == "" && r.Method == http.MethodPost:
		op = "jobs.query"
	case m[2] != "" && r.Method == http.MethodGet:
		op = "jobs.getQueryResults"
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, queryRequest{Op: op, Method: r.Method, URI: r.URL.RequestURI(), Body: body})
	f.t.Logf("query fake: %s %s (%d bytes)", r.Method, r.URL.RequestURI(), len(body))
	if op == "" {
		f.report("query fake: unexpected request %s %s: the client made a call the fake does not know", r.Method, r.URL.RequestURI())
		writeError(w, http.StatusNotFound, "notFound", "query fake: no route for "+r.Method+" "+r.URL.Path)
		return
	}
	if m[1] != testProject {
		f.report("query fake: %s for project %q, want %q", op, m[1], testProject)
		writeError(w, http.StatusNotFound, "notFound", "query fake: unknown project "+m[1])
		return
	}
	switch op {
	case "jobs.query":
		if len(f.answers) == 0 {
			f.report("query fake: jobs.query with no answer queued: %s", body)
			writeError(w, http.StatusBadRequest, "invalid", "query fake: no answer queued")
			return
		}
		a := f.answers[0]
		f.answers = f.answers[1:]
		if a.status != 0 {
			writeError(w, a.status, reasonFor(a.status), "query fake: injected failure")
			return
		}
		f.seq++
		id := fmt.Sprintf("job_%d", f.seq)
		f.jobs[id] = a
		resp := map[string]any{
			"kind":         "bigquery#queryResponse",
			"jobReference": map[string]any{"projectId": testProject, "jobId": id, "location": "US"},
			"jobComplete":  a.pending == 0,
		}
		if a.pending > 0 {
			a.pending--
		} else {
			a.page(resp, 0, a.pageSize)
		}
		writeJSON(w, http.StatusOK, resp)
	case "jobs.getQueryResults":
		a := f.jobs[m[2]]
		if a == nil {
			f.report("query fake: getQueryResults of unknown job %q", m[2])
			writeError(w, http.StatusNotFound, "notFound", "query fake: no job "+m[2])
			return
		}
		qv := r.URL.Query()
		if loc := qv.Get("location"); loc != "US" {
			f.report("query fake: getQueryResults location = %q, want the job's US", loc)
		}
		resp := map[string]any{
			"kind":         "bigquery#getQueryResultsResponse",
			"jobReference": map[string]any{"projectId": testProject, "jobId": m[2], "location": "US"},
			"jobComplete":  a.pending == 0,
		}
		if a.pending > 0 {
			a.pending--
			writeJSON(w, http.StatusOK, resp)
			return
		}
		n := a.pageSize
		if s := qv.Get("maxResults"); s != "" {
			n, _ = strconv.Atoi(s)
			if n == 0 { // a completion poll: schema and count, no rows
				resp["schema"] = a.schema()
				resp["totalRows"] = strconv.Itoa(len(a.rows))
				writeJSON(w, http.StatusOK, resp)
				return
			}
		}
		if a.pageStatus != 0 {
			writeError(w, a.pageStatus, reasonFor(a.pageStatus), "query fake: injected page failure")
			return
		}
		start := 0
		if tok := qv.Get("pageToken"); tok != "" {
			if _, err := fmt.Sscanf(tok, "row-%d", &start); err != nil {
				f.report("query fake: bad page token %q", tok)
			}
		} else if s := qv.Get("startIndex"); s != "" {
			start, _ = strconv.Atoi(s)
		}
		a.page(resp, start, n)
		writeJSON(w, http.StatusOK, resp)
	}
}

// clone copies the answer, rows included, so table cases can share one.
func (a *queryAnswer) clone() *queryAnswer {
	c := *a
	c.columns = append([]queryColumn(nil), a.columns...)
	c.rows = make([][]any, len(a.rows))
	for i, r := range a.rows {
		c.rows[i] = append([]any(nil), r...)
	}
	return &c
}

func (a *queryAnswer) schema() map[string]any {
	fields := make([]map[string]any, len(a.columns))
	for i, c := range a.columns {
		fields[i] = map[string]any{"name": c.Name, "type": c.Type, "mode": "NULLABLE"}
	}
	return map[string]any{"fields": fields}
}

// page fills resp with the schema, totalRows and up to n rows (all when n <= 0) from start, as
// BigQuery does: no "rows" key for an empty page, a pageToken when rows remain.
func (a *queryAnswer) page(resp map[string]any, start, n int) {
	resp["schema"] = a.schema()
	resp["totalRows"] = strconv.Itoa(len(a.rows))
	end := len(a.rows)
	if n > 0 && start+n < end {
		end = start + n
	}
	if start > end {
		start = end
	}
	var rows []map[string]any
	for _, row := range a.rows[start:end] {
		cells := make([]map[string]any, len(row))
		for i, v := range row {
			cells[i] = map[string]any{"v": v}
		}
		rows = append(rows, map[string]any{"f": cells})
	}
	if len(rows) > 0 {
		resp["rows"] = rows
	}
	if end < len(a.rows) {
		resp["pageToken"] = fmt.Sprintf("row-%d", end)
	}
}

// userRows is a result of one STRING column user_id.
func userRows(ids ...string) *queryAnswer {
	a := &queryAnswer{columns: []queryColumn{{"user_id", "STRING"}}}
	for _, id := range ids {
		a.rows = append(a.rows, []any{id})
	}
	return a
}

// previewRows is a CountAndSample result: (user_id STRING, total INT64).
func previewRows(total int64, ids ...string) *queryAnswer {
	a := &queryAnswer{columns: []queryColumn{{"user_id", "STRING"}, {"total", "INTEGER"}}}
	for _, id := range ids {
		a.rows = append(a.rows, []any{id, strconv.FormatInt(total, 10)})
	}
	return a
}

// countRow is a Count result: one INT64 column, as BigQuery names an unaliased COUNT(*).
func countRow(n int64) *queryAnswer {
	return &queryAnswer{columns: []queryColumn{{"f0_", "INTEGER"}}, rows: [][]any{{strconv.FormatInt(n, 10)}}}
}

// sentQuery is the part of a jobs.query request body the tests check.
type sentQuery struct {
	Query           string      `json:"query"`
	UseLegacySQL    *bool       `json:"useLegacySql"`
	RequestID       string      `json:"requestId"`
	QueryParameters []sentParam `json:"queryParameters"`
}

type sentParam struct {
	Name           string          `json:"name"`
	ParameterType  json.RawMessage `json:"parameterType"`
	ParameterValue json.RawMessage `json:"parameterValue"`
}

// params indexes the parameters by name, failing on duplicates.
func (q sentQuery) params(t *testing.T) map[string]sentParam {
	t.Helper()
	out := map[string]sentParam{}
	for _, p := range q.QueryParameters {
		if _, dup := out[p.Name]; dup {
			t.Errorf("parameter %q sent twice", p.Name)
		}
		out[p.Name] = p
	}
	return out
}

func newSegmentsRunner(t *testing.T, f *queryFake) *Segments {
	t.Helper()
	w, err := New(context.Background(), Config{
		Project: testProject,
		Dataset: testDataset,
		ClientOptions: []option.ClientOption{
			option.WithEndpoint(f.srv.URL),
			option.WithoutAuthentication(),
		},
	})
	if err != nil {
		t.Fatalf("new: %v", err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w.Segments()
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// segNow has nanoseconds: BigQuery TIMESTAMPs keep microseconds.
var segNow = time.Date(2026, 5, 1, 12, 0, 0, 123456789, time.UTC)

// everyKindDefinition uses every parameter kind the BigQuery compiler binds.
const everyKindDefinition = `{"logic":"AND","conditions":[
	{"type":"monetary","event_type":"order_completed","property":"amount","metric":"sum","operator":"gte","value":100.5,"window_days":30},
	{"type":"frequency","event_type":"page_view","operator":"gte","value":3,"window_days":7},
	{"type":"event_property","event_type":"page_view","property":"plan","operator":"in","value":["pro","team",42]},
	{"type":"event_property","event_type":"signup","property":"beta","operator":"eq","value":true},
	{"type":"event_property","event_type":"order_completed","property":"items","operator":"gt","value":2.25},
	{"type":"trait","trait":"country","operator":"eq","value":"DE"},
	{"logic":"OR","conditions":[{"type":"in_segment","segment_id":7},{"type":"in_segment","segment_id":9}]}
]}`

func compileFor(t *testing.T, s segment.Runner, d segment.Dialect, raw string) *segment.Query {
	t.Helper()
	def, err := segment.ParseDefinition([]byte(raw))
	if err != nil {
		t.Fatalf("parse definition: %v", err)
	}
	q, err := segment.Compile(def, d, segment.CompileOptions{TenantID: 42, Now: segNow, Table: s.Table()})
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return q
}

// canonJSON re-encodes JSON with sorted keys for comparison.
func canonJSON(t *testing.T, raw []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("invalid JSON %s: %v", raw, err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// bqTimestamp is a BigQuery TIMESTAMP literal: date, time, at most microseconds, a UTC offset.
var bqTimestamp = regexp.MustCompile(`^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d{1,6})?[+-]\d{2}:\d{2}$`)

// checkParam checks that p is the BigQuery REST encoding of want, written out from the API
// reference (QueryParameterType / QueryParameterValue), not from the client's code.
func checkParam(t *testing.T, p sentParam, want any) {
	t.Helper()
	var wantType string
	switch want.(type) {
	case int64:
		wantType = `{"type":"INT64"}`
	case float64:
		wantType = `{"type":"FLOAT64"}`
	case string:
		wantType = `{"type":"STRING"}`
	case bool:
		wantType = `{"type":"BOOL"}`
	case time.Time:
		wantType = `{"type":"TIMESTAMP"}`
	case []string:
		wantType = `{"arrayType":{"type":"STRING"},"type":"ARRAY"}`
	default:
		t.Fatalf("@%s: test does not know %T", p.Name, want)
	}
	if got := canonJSON(t, p.ParameterType); got != wantType {
		t.Errorf("@%s parameterType = %s, want %s", p.Name, got, wantType)
	}
	if len(p.ParameterValue) == 0 || string(p.ParameterValue) == "null" {
		t.Errorf("@%s: parameterValue is %q: BigQuery would read NULL", p.Name, p.ParameterValue)
		return
	}
	var val map[string]json.RawMessage
	if err := json.Unmarshal(p.ParameterValue, &val); err != nil {
		t.Errorf("@%s parameterValue %s is not an object: %v", p.Name, p.ParameterValue, err)
		return
	}
	if list, ok := want.([]string); ok {
		if _, has := val["value"]; has || len(val) > 1 {
			t.Errorf("@%s parameterValue = %s, want only arrayValues", p.Name, p.ParameterValue)
		}
		// arrayValues is a repeated field: left out and [] are the same empty array (JSON-proto
		// mapping); null elements would be NULLs inside the array.
		var elems []map[string]json.RawMessage
		if raw, has := val["arrayValues"]; has {
			if err := json.Unmarshal(raw, &elems); err != nil || elems == nil {
				t.Errorf("@%s arrayValues = %s, want an array", p.Name, raw)
				return
			}
		}
		got := []string{}
		for i, e := range elems {
			var s *string
			if len(e) != 1 || json.Unmarshal(e["value"], &s) != nil || s == nil {
				t.Errorf("@%s arrayValues[%d] = %v, want {\"value\": string}", p.Name, i, e)
				continue
			}
			got = append(got, *s)
		}
		if !reflect.DeepEqual(got, append([]string{}, list...)) {
			t.Errorf("@%s array = %q, want %q", p.Name, got, list)
		}
		return
	}
	raw, has := val["value"]
	var s string
	if !has || len(val) != 1 || json.Unmarshal(raw, &s) != nil {
		t.Errorf("@%s parameterValue = %s, want exactly {\"value\": string}", p.Name, p.ParameterValue)
		return
	}
	switch w := want.(type) {
	case int64:
		if s != strconv.FormatInt(w, 10) {
			t.Errorf("@%s value = %q, want %d", p.Name, s, w)
		}
	case float64:
		if f, err := strconv.ParseFloat(s, 64); err != nil || f != w {
			t.Errorf("@%s value = %q, want %v exactly", p.Name, s, w)
		}
	case string:
		if s != w {
			t.Errorf("@%s value = %q, want %q", p.Name, s, w)
		}
	case bool:
		if s != strconv.FormatBool(w) {
			t.Errorf("@%s value = %q, want %t", p.Name, s, w)
		}
	case time.Time:
		ts, err := time.Parse("2006-01-02 15:04:05.999999999-07:00", s)
		if !bqTimestamp.MatchString(s) || err != nil {
			t.Errorf("@%s value = %q, not a BigQuery TIMESTAMP literal (%v)", p.Name, s, err)
		} else if !ts.Equal(w.Truncate(time.Microsecond)) {
			t.Errorf("@%s value = %q = %v, want %v", p.Name, s, ts, w.Truncate(time.Microsecond))
		}
	}
}

var bqPlaceholder = regexp.MustCompile(`@[A-Za-z_][A-Za-z0-9_]*`)

func TestSegmentsRunner(t *testing.T) {
	s := newSegmentsRunner(t, newQueryFake(t))
	if got := s.Dialect(); got != segment.BigQuery {
		t.Errorf("Dialect() = %q, want bigquery", got)
	}
	if got, want := s.Table(), testProject+"."+testDataset+"."+DefaultTable; got != want {
		t.Errorf("Table() = %q, want %q", got, want)
	}
}

func TestSegmentsUsersParameters(t *testing.T) {
	for _, tc := range []struct {
		name      string
		segParams map[string][]string
		wantSeg9  []string
	}{
		{"empty member list", map[string][]string{"seg7": {"m1", "m'2"}, "seg9": {}}, []string{}},
		{"nil member list", map[string][]string{"seg7": {"m1", "m'2"}, "seg9": nil}, []string{}},
		{"members in both", map[string][]string{"seg7": {"m1", "m'2"}, "seg9": {"", "x"}}, []string{"", "x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newQueryFake(t)
			s := newSegmentsRunner(t, f)
			q := compileFor(t, s, segment.BigQuery, everyKindDefinition)
			f.answer(userRows("u3", "u1", "u2"))

			var got []string
			err := s.Users(testCtx(t), q, tc.segParams, func(id string) error {
				got = append(got, id)
				return nil
			})
			if err != nil {
				t.Fatalf("Users: %v", err)
			}
			if want := []string{"u3", "u1", "u2"}; !reflect.DeepEqual(got, want) {
				t.Errorf("ids = %q, want %q", got, want)
			}
			if ops, want := f.ops(), []string{"jobs.query"}; !reflect.DeepEqual(ops, want) {
				t.Errorf("requests = %q, want %q", ops, want)
			}
			sent := f.sentQueries()
			if len(sent) != 1 {
				t.Fatalf("%d jobs.query requests, want 1", len(sent))
			}
			sq := sent[0]
			if sq.Query != q.SQL {
				t.Errorf("query text differs from q.SQL:\n got %q\nwant %q", sq.Query, q.SQL)
			}
			if sq.UseLegacySQL == nil || *sq.UseLegacySQL {
				t.Errorf("useLegacySql = %v, want an explicit false", sq.UseLegacySQL)
			}
			if sq.RequestID == "" {
				t.Error("requestId is empty: jobs.query retries would not be idempotent")
			}

			byName := sq.params(t)
			if n, want := len(sq.QueryParameters), len(q.Params)+len(q.SegmentParams); n != want {
				t.Errorf("%d parameters sent, want %d (%d values + %d segments)", n, want, len(q.Params), len(q.SegmentParams))
			}
			for _, p := range q.Params {
				sp, ok := byName[p.Name]
				if !ok {
					t.Errorf("@%s (%T %v) not sent", p.Name, p.Value, p.Value)
					continue
				}
				checkParam(t, sp, p.Value)
			}
			if want := map[string]int64{"seg7": 7, "seg9": 9}; !reflect.DeepEqual(q.SegmentParams, want) {
				t.Fatalf("SegmentParams = %v, want %v", q.SegmentParams, want)
			}
			for name, want := range map[string][]string{"seg7": {"m1", "m'2"}, "seg9": tc.wantSeg9} {
				sp, ok := byName[name]
				if !ok {
					t.Errorf("@%s not sent", name)
					continue
				}
				checkParam(t, sp, want)
			}
			// Every @name in the text is bound: BigQuery fails a query with an unbound one.
			for _, ph := range bqPlaceholder.FindAllString(q.SQL, -1) {
				if _, ok := byName[ph[1:]]; !ok {
					t.Errorf("%s is in the query but not sent", ph)
				}
			}

			// The compiled definition binds each kind; pin the exact wire form of each, written out
			// by hand (kinds the compiler never binds, like BOOL, are covered by
			// TestSegmentsParameterEncoding).
			sentForms := map[string]bool{}
			for _, p := range sq.QueryParameters {
				sentForms[canonJSON(t, p.ParameterType)+" "+canonJSON(t, p.ParameterValue)] = true
			}
			for _, want := range []string{
				`{"type":"INT64"} {"value":"42"}`, // tenant
				`{"type":"INT64"} {"value":"3"}`,  // frequency
				`{"type":"FLOAT64"} {"value":"100.5"}`,
				`{"type":"FLOAT64"} {"value":"2.25"}`,
				`{"type":"TIMESTAMP"} {"value":"2026-04-01 12:00:00.123456+00:00"}`, // monetary window_days 30
				`{"type":"TIMESTAMP"} {"value":"2026-04-24 12:00:00.123456+00:00"}`, // frequency window_days 7
				`{"arrayType":{"type":"STRING"},"type":"ARRAY"} {"arrayValues":[{"value":"pro"},{"value":"team"},{"value":"42"}]}`,
				`{"type":"STRING"} {"value":"order_completed"}`,
				`{"type":"STRING"} {"value":"amount"}`,
				`{"type":"STRING"} {"value":"plan"}`,
				`{"type":"STRING"} {"value":"true"}`, // event_property eq true compares the text
				`{"type":"STRING"} {"value":"country"}`,
				`{"type":"STRING"} {"value":"DE"}`,
				`{"arrayType":{"type":"STRING"},"type":"ARRAY"} {"arrayValues":[{"value":"m1"},{"value":"m'2"}]}`,
			} {
				if !sentForms[want] {
					t.Errorf("no parameter sent as %s", want)
				}
			}
		})
	}
}

// TestSegmentsParameterEncoding covers every Param value type, with the edge values, on a
// hand-built query.
func TestSegmentsParameterEncoding(t *testing.T) {
	at := time.Date(2026, 3, 29, 1, 30, 0, 999_999_999, time.FixedZone("CEST", 2*3600))
	for _, tc := range []struct {
		name      string
		value     any
		wantType  string
		wantValue string
	}{
		{"int64", int64(-9007199254740993), `{"type":"INT64"}`, `{"value":"-9007199254740993"}`},
		{"int64 zero", int64(0), `{"type":"INT64"}`, `{"value":"0"}`},
		{"float64", 0.1, `{"type":"FLOAT64"}`, `{"value":"0.1"}`},
		{"float64 whole", float64(100), `{"type":"FLOAT64"}`, `{"value":"100"}`},
		{"float64 large", 1e21, `{"type":"FLOAT64"}`, `{"value":"1e+21"}`},
		{"float64 zero", float64(0), `{"type":"FLOAT64"}`, `{"value":"0"}`},
		{"string", "a'b\"c\\", `{"type":"STRING"}`, `{"value":"a'b\"c\\"}`},
		{"empty string is sent, not NULL", "", `{"type":"STRING"}`, `{"value":""}`},
		{"bool true", true, `{"type":"BOOL"}`, `{"value":"true"}`},
		{"bool false is sent, not NULL", false, `{"type":"BOOL"}`, `{"value":"false"}`},
		{"timestamp keeps its offset and microseconds", at, `{"type":"TIMESTAMP"}`, `{"value":"2026-03-29 01:30:00.999999+02:00"}`},
		{"timestamp UTC", time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC), `{"type":"TIMESTAMP"}`, `{"value":"2026-05-01 00:00:00+00:00"}`},
		{"string array", []string{"a", "", "c"}, `{"arrayType":{"type":"STRING"},"type":"ARRAY"}`, `{"arrayValues":[{"value":"a"},{"value":""},{"value":"c"}]}`},
		{"empty string array", []string{}, `{"arrayType":{"type":"STRING"},"type":"ARRAY"}`, `{}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newQueryFake(t)
			s := newSegmentsRunner(t, f)
			q := &segment.Query{Dialect: segment.BigQuery, SQL: "SELECT user_id FROM t WHERE x = @v", Params: []segment.Param{{Name: "v", Value: tc.value}}}
			f.answer(userRows())
			if err := s.Users(testCtx(t), q, nil, func(string) error { return nil }); err != nil {
				t.Fatalf("Users: %v", err)
			}
			sent := f.sentQueries()
			if len(sent) != 1 || len(sent[0].QueryParameters) != 1 {
				t.Fatalf("sent %+v, want one query with one parameter", sent)
			}
			p := sent[0].QueryParameters[0]
			if p.Name != "v" {
				t.Errorf("name = %q, want v", p.Name)
			}
			checkParam(t, p, tc.value)
			if got := canonJSON(t, p.ParameterType); got != tc.wantType {
				t.Errorf("parameterType = %s, want %s", got, tc.wantType)
			}
			if got := canonJSON(t, p.ParameterValue); got != tc.wantValue {
				t.Errorf("parameterValue = %s, want %s", got, tc.wantValue)
			}
		})
	}
}

func TestSegmentsUsersPaths(t *testing.T) {
	ids := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("user-%03d", i)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		answer  *queryAnswer
		want    []string
		wantOps []string
	}{
		{
			name:    "rows in the jobs.query answer",
			answer:  userRows("a", "b", "c"),
			want:    []string{"a", "b", "c"},
			wantOps: []string{"jobs.query"},
		},
		{
			// BigQuery leaves rows out of an empty result: the client reads the first page itself.
			name:    "no rows",
			answer:  userRows(),
			want:    nil,
			wantOps: []string{"jobs.query", "jobs.getQueryResults"},
		},
		{
			name:    "pages",
			answer:  func() *queryAnswer { a := userRows(ids(25)...); a.pageSize = 10; return a }(),
			want:    ids(25),
			wantOps: []string{"jobs.query", "jobs.getQueryResults", "jobs.getQueryResults"},
		},
		{
			// A query running past jobs.query's wait: the client polls getQueryResults
			// (maxResults=0) until the job completes, then reads the rows.
			name:    "slow job",
			answer:  func() *queryAnswer { a := userRows("a", "b"); a.pending = 2; return a }(),
			want:    []string{"a", "b"},
			wantOps: []string{"jobs.query", "jobs.getQueryResults", "jobs.getQueryResults", "jobs.getQueryResults"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newQueryFake(t)
			s := newSegmentsRunner(t, f)
			q := compileFor(t, s, segment.BigQuery, `{"logic":"AND","conditions":[{"type":"frequency","event_type":"page_view","operator":"gte","value":1}]}`)
			f.answer(tc.answer)
			var got []string
			if err := s.Users(testCtx(t), q, nil, func(id string) error { got = append(got, id); return nil }); err != nil {
				t.Fatalf("Users: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ids = %q, want %q", got, tc.want)
			}
			if ops := f.ops(); !reflect.DeepEqual(ops, tc.wantOps) {
				t.Errorf("requests = %q, want %q", ops, tc.wantOps)
			}
		})
	}
}

func TestSegmentsUsersCallbackError(t *testing.T) {
	f := newQueryFake(t)
	s := newSegmentsRunner(t, f)
	q := compileFor(t, s, segment.BigQuery, `{"logic":"AND","conditions":[{"type":"frequency","event_type":"page_view","operator":"gte","value":1}]}`)
	f.answer(userRows("a", "b", "c"))
	stop := errors.New("copy failed")
	var got []string
	err := s.Users(testCtx(t), q, nil, func(id string) error {
		got = append(got, id)
		if len(got) == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Fatalf("Users error = %v, want the callback's", err)
	}
	if want := []string{"a", "b"}; !reflect.DeepEqual(got, want) {
		t.Errorf("ids = %q, want %q (no call after the error)", got, want)
	}
}

func TestSegmentsCountAndSample(t *testing.T) {
	const def = `{"logic":"AND","conditions":[{"type":"frequency","event_type":"page_view","operator":"gte","value":2,"window_days":7},{"type":"in_segment","segment_id":5}]}`
	for _, tc := range []struct {
		name        string
		limit       int
		answers     []*queryAnswer
		wantTotal   int64
		wantSample  []string
		wantQueries func(q *segment.Query) []string
		wantOps     []string
	}{
		{
			name:        "sample and total",
			limit:       3,
			answers:     []*queryAnswer{previewRows(57, "u1", "u2", "u3")},
			wantTotal:   57,
			wantSample:  []string{"u1", "u2", "u3"},
			wantQueries: func(q *segment.Query) []string { return []string{q.CountAndSample(3)} },
			wantOps:     []string{"jobs.query"},
		},
		{
			name:        "fewer matches than the limit",
			limit:       10,
			answers:     []*queryAnswer{previewRows(2, "u1", "u2")},
			wantTotal:   2,
			wantSample:  []string{"u1", "u2"},
			wantQueries: func(q *segment.Query) []string { return []string{q.CountAndSample(10)} },
			wantOps:     []string{"jobs.query"},
		},
		{
			name:        "no match",
			limit:       10,
			answers:     []*queryAnswer{previewRows(0)},
			wantTotal:   0,
			wantSample:  []string{},
			wantQueries: func(q *segment.Query) []string { return []string{q.CountAndSample(10)} },
			wantOps:     []string{"jobs.query", "jobs.getQueryResults"},
		},
		{
			name:        "slow job",
			limit:       2,
			answers:     []*queryAnswer{func() *queryAnswer { a := previewRows(9, "u1", "u2"); a.pending = 1; return a }()},
			wantTotal:   9,
			wantSample:  []string{"u1", "u2"},
			wantQueries: func(q *segment.Query) []string { return []string{q.CountAndSample(2)} },
			wantOps:     []string{"jobs.query", "jobs.getQueryResults", "jobs.getQueryResults"},
		},
		{
			// LIMIT 0 returns no row to carry the total: only the count runs.
			name:        "limit 0 counts",
			limit:       0,
			answers:     []*queryAnswer{countRow(123)},
			wantTotal:   123,
			wantSample:  []string{},
			wantQueries: func(q *segment.Query) []string { return []string{q.Count()} },
			wantOps:     []string{"jobs.query"},
		},
		{
			name:        "limit 0 slow count",
			limit:       0,
			answers:     []*queryAnswer{func() *queryAnswer { a := countRow(7); a.pending = 1; return a }()},
			wantTotal:   7,
			wantSample:  []string{},
			wantQueries: func(q *segment.Query) []string { return []string{q.Count()} },
			wantOps:     []string{"jobs.query", "jobs.getQueryResults", "jobs.getQueryResults"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newQueryFake(t)
			s := newSegmentsRunner(t, f)
			q := compileFor(t, s, segment.BigQuery, def)
			f.answer(tc.answers...)
			total, sample, err := s.CountAndSample(testCtx(t), q, map[string][]string{"seg5": {"u1", "u9"}}, tc.limit)
			if err != nil {
				t.Fatalf("CountAndSample: %v", err)
			}
			if total != tc.wantTotal {
				t.Errorf("total = %d, want %d", total, tc.wantTotal)
			}
			if sample == nil || !reflect.DeepEqual(sample, tc.wantSample) {
				t.Errorf("sample = %#v, want %#v", sample, tc.wantSample)
			}
			if ops := f.ops(); !reflect.DeepEqual(ops, tc.wantOps) {
				t.Errorf("requests = %q, want %q", ops, tc.wantOps)
			}
			sent := f.sentQueries()
			var texts []string
			for _, sq := range sent {
				texts = append(texts, sq.Query)
				// Every query carries all the parameters, the members included.
				byName := sq.params(t)
				for _, p := range q.Params {
					if sp, ok := byName[p.Name]; !ok {
						t.Errorf("@%s not sent with %q", p.Name, sq.Query)
					} else {
						checkParam(t, sp, p.Value)
					}
				}
				if sp, ok := byName["seg5"]; !ok {
					t.Errorf("@seg5 not sent with %q", sq.Query)
				} else {
					checkParam(t, sp, []string{"u1", "u9"})
				}
			}
			if want := tc.wantQueries(q); !reflect.DeepEqual(texts, want) {
				t.Errorf("queries = %q, want %q", texts, want)
			}
		})
	}
}

func TestSegmentsErrors(t *testing.T) {
	const def = `{"logic":"AND","conditions":[{"type":"frequency","event_type":"page_view","operator":"gte","value":1},{"type":"in_segment","segment_id":5}]}`
	members := map[string][]string{"seg5": {"u1"}}
	failingPage := func(a *queryAnswer) *queryAnswer { a.pending, a.pageStatus = 1, http.StatusBadRequest; return a }
	for _, tc := range []struct {
		name      string
		dialect   segment.Dialect
		segParams map[string][]string
		answers   []*queryAnswer
		limit     int
		wantCode  int    // the *googleapi.Error code in the error chain; 0: none
		wantMsg   string // in the error text
		wantOps   int    // requests the fake gets
	}{
		{"query rejected", segment.BigQuery, members, []*queryAnswer{{status: http.StatusBadRequest}}, 5, http.StatusBadRequest, "", 1},
		{"not found", segment.BigQuery, members, []*queryAnswer{{status: http.StatusNotFound}}, 5, http.StatusNotFound, "", 1},
		{"forbidden", segment.BigQuery, members, []*queryAnswer{{status: http.StatusForbidden}}, 5, http.StatusForbidden, "", 1},
		{"reading rows fails", segment.BigQuery, members, []*queryAnswer{failingPage(previewRows(3, "u1"))}, 5, http.StatusBadRequest, "", 3},
		{"limit 0: count rejected", segment.BigQuery, members, []*queryAnswer{{status: http.StatusBadRequest}}, 0, http.StatusBadRequest, "", 1},
		{"limit 0: reading the count fails", segment.BigQuery, members, []*queryAnswer{failingPage(countRow(3))}, 0, http.StatusBadRequest, "", 3},
		{"members not bound", segment.BigQuery, map[string][]string{}, nil, 5, 0, "@seg5", 0},
		{"members map nil", segment.BigQuery, nil, nil, 5, 0, "@seg5", 0},
		{"compiled for postgres", segment.Postgres, members, nil, 5, 0, "postgres", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := func(t *testing.T, err error, f *queryFake) {
				t.Helper()
				if err == nil {
					t.Fatal("no error")
				}
				if tc.wantMsg != "" && !strings.Contains(err.Error(), tc.wantMsg) {
					t.Errorf("error %q does not mention %q", err, tc.wantMsg)
				}
				var gerr *googleapi.Error
				switch {
				case tc.wantCode == 0 && errors.As(err, &gerr):
					t.Errorf("error %v is an API error, want a local refusal", err)
				case tc.wantCode != 0 && (!errors.As(err, &gerr) || gerr.Code != tc.wantCode):
					t.Errorf("error %v (%T), want the API's %d in the chain", err, err, tc.wantCode)
				}
				if n := len(f.requests("")); n != tc.wantOps {
					t.Errorf("%d requests (%q), want %d", n, f.ops(), tc.wantOps)
				}
			}
			t.Run("Users", func(t *testing.T) {
				f := newQueryFake(t)
				s := newSegmentsRunner(t, f)
				q := compileFor(t, s, tc.dialect, def)
				// Users reads one column: keep the user ids.
				var answers []*queryAnswer
				for _, a := range tc.answers {
					c := a.clone()
					c.columns = c.columns[:min(1, len(c.columns))]
					for i := range c.rows {
						c.rows[i] = c.rows[i][:1]
					}
					answers = append(answers, c)
				}
				f.answer(answers...)
				called := 0
				err := s.Users(testCtx(t), q, tc.segParams, func(string) error { called++; return nil })
				check(t, err, f)
				if called > 0 {
					t.Errorf("callback called %d times, want none", called)
				}
			})
			t.Run("CountAndSample", func(t *testing.T) {
				f := newQueryFake(t)
				s := newSegmentsRunner(t, f)
				q := compileFor(t, s, tc.dialect, def)
				for _, a := range tc.answers {
					f.answer(a.clone())
				}
				total, sample, err := s.CountAndSample(testCtx(t), q, tc.segParams, tc.limit)
				check(t, err, f)
				if total != 0 || sample != nil {
					t.Errorf("CountAndSample = %d, %q with the error, want 0, nil", total, sample)
				}
			})
		})
	}
}

// TestSegmentsQueryFakeRejectsUnknownCalls checks the fake itself: a call it does not know is
// reported as a test failure instead of passing silently.
func TestSegmentsQueryFakeRejectsUnknownCalls(t *testing.T) {
	for _, tc := range []struct {
		name, method, path, want string
	}{
		{"jobs.insert", http.MethodPost, "/projects/" + testProject + "/jobs", "unexpected request POST /projects/" + testProject + "/jobs"},
		{"jobs.get", http.MethodGet, "/projects/" + testProject + "/jobs/job_1", "unexpected request GET /projects/" + testProject + "/jobs/job_1"},
		{"tabledata.list", http.MethodGet, "/projects/" + testProject + "/datasets/d/tables/t/data", "unexpected request GET"},
		{"other project", http.MethodPost, "/projects/elsewhere/queries", `for project "elsewhere"`},
		{"unknown job", http.MethodGet, "/projects/" + testProject + "/queries/job_9", `unknown job "job_9"`},
		{"no answer queued", http.MethodPost, "/projects/" + testProject + "/queries", "no answer queued"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newQueryFake(t)
			var reported []string
			f.report = func(format string, args ...any) { reported = append(reported, fmt.Sprintf(format, args...)) }
			req, err := http.NewRequest(tc.method, f.srv.URL+tc.path, strings.NewReader(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode < 400 || resp.StatusCode >= 500 {
				t.Errorf("status = %d, want a 4xx the client does not retry", resp.StatusCode)
			}
			if len(reported) != 1 || !strings.Contains(reported[0], tc.want) {
				t.Errorf("fake reported %q, want one failure containing %q", reported, tc.want)
			}
		})
	}
}
