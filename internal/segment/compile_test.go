package segment_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cohort-dev/cohort/internal/segment"
	"github.com/cohort-dev/cohort/internal/testenv"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files of TestCompileGolden")

// compileNow and compileOpts are the inputs of every compilation of these tests.
var (
	compileNow  = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	compileOpts = segment.CompileOptions{TenantID: 42, Now: compileNow, Table: "proj.analytics.events"}
	dialects    = []segment.Dialect{segment.Postgres, segment.BigQuery}
)

// daysAgo is compileNow minus d days.
func daysAgo(d float64) time.Time { return compileNow.Add(-time.Duration(d * float64(24*time.Hour))) }

// goldenDefinitions reads testdata/definitions/*.json: name (file name without .json) to content.
func goldenDefinitions(tb testing.TB) map[string][]byte {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "definitions", "*.json"))
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".json")] = b
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// renderGolden is a golden file: the SQL, its parameters, then the display form.
func renderGolden(q *segment.Query) string {
	var b strings.Builder
	b.WriteString(q.SQL)
	b.WriteString("\n-- params:\n")
	for _, p := range q.Params {
		ph := "$" + p.Name
		if q.Dialect == segment.BigQuery {
			ph = "@" + p.Name
		}
		fmt.Fprintf(&b, "-- %s = %s\n", ph, formatParam(p.Value))
	}
	for _, name := range sortedKeys(q.SegmentParams) {
		fmt.Fprintf(&b, "-- @%s = members of segment %d, bound at run time\n", name, q.SegmentParams[name])
	}
	b.WriteString("-- display:\n")
	b.WriteString(q.Display())
	b.WriteString("\n")
	return b.String()
}

func formatParam(v any) string {
	switch x := v.(type) {
	case time.Time:
		return "time.Time(" + x.Format(time.RFC3339Nano) + ")"
	case []string:
		return fmt.Sprintf("%#v", x)
	}
	return fmt.Sprintf("%T(%#v)", v, v)
}

// TestCompileGolden compiles testdata/definitions/*.json for both dialects and compares with
// testdata/golden/<name>.<dialect>.sql; -update rewrites them.
func TestCompileGolden(t *testing.T) {
	defs := goldenDefinitions(t)
	if len(defs) < 12 {
		t.Fatalf("only %d golden definitions", len(defs))
	}
	want := map[string]bool{}
	for _, name := range sortedKeys(defs) {
		for _, d := range dialects {
			want[name+"."+string(d)+".sql"] = true
		}
		t.Run(name, func(t *testing.T) {
			def, err := segment.ParseDefinition(defs[name])
			if err != nil {
				t.Fatalf("ParseDefinition: %v", err)
			}
			for _, d := range dialects {
				q, err := segment.Compile(def, d, compileOpts)
				if err != nil {
					t.Fatalf("Compile %s: %v", d, err)
				}
				got := renderGolden(q)
				path := filepath.Join("testdata", "golden", name+"."+string(d)+".sql")
				if *updateGolden {
					if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				b, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run go test ./internal/segment -run Golden -update)", err)
				}
				if string(b) != got {
					t.Errorf("%s differs from the compiled SQL (run with -update and review the diff):\n%s", path, firstDiff(string(b), got))
				}
			}
		})
	}
	if *updateGolden {
		return
	}
	// No stale golden files.
	files, _ := filepath.Glob(filepath.Join("testdata", "golden", "*.sql"))
	for _, f := range files {
		if !want[filepath.Base(f)] {
			t.Errorf("%s has no definition in testdata/definitions", f)
		}
	}
}

func firstDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return fmt.Sprintf("line %d:\n golden:   %s\n compiled: %s", i+1, w, g)
		}
	}
	return ""
}

func TestCompileErrors(t *testing.T) {
	def, err := segment.ParseDefinition([]byte(seedDefinition))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		def  *segment.Definition
		d    segment.Dialect
		o    segment.CompileOptions
		msg  string
	}{
		{"nil definition", nil, segment.Postgres, compileOpts, "empty definition"},
		{"no conditions", &segment.Definition{Logic: "AND"}, segment.BigQuery, compileOpts, "empty definition"},
		{"unknown dialect", def, segment.Dialect("mysql"), compileOpts, `unknown dialect "mysql"`},
		{"empty dialect", def, "", compileOpts, "unknown dialect"},
		{"no bigquery table", def, segment.BigQuery, segment.CompileOptions{TenantID: 42, Now: compileNow}, "not project.dataset.table"},
		{"bigquery table without dataset", def, segment.BigQuery, segment.CompileOptions{TenantID: 42, Now: compileNow, Table: "events"}, "not project.dataset.table"},
		{"bigquery table with a backtick", def, segment.BigQuery, segment.CompileOptions{TenantID: 42, Now: compileNow, Table: "p.d.events`; DROP TABLE x; --"}, "not project.dataset.table"},
		{"bigquery table with a space", def, segment.BigQuery, segment.CompileOptions{TenantID: 42, Now: compileNow, Table: "p.d. events"}, "not project.dataset.table"},
		{"bigquery table with four parts", def, segment.BigQuery, segment.CompileOptions{TenantID: 42, Now: compileNow, Table: "a.b.c.d"}, "not project.dataset.table"},
		{"bigquery table with a trailing newline", def, segment.BigQuery, segment.CompileOptions{TenantID: 42, Now: compileNow, Table: "p.d.events\n"}, "not project.dataset.table"},
		{"zero now postgres", def, segment.Postgres, segment.CompileOptions{TenantID: 42}, "no reference time"},
		{"zero now bigquery", def, segment.BigQuery, segment.CompileOptions{TenantID: 42, Table: "p.d.e"}, "no reference time"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, err := segment.Compile(tc.def, tc.d, tc.o)
			if err == nil {
				t.Fatalf("Compile succeeded:\n%s", q.SQL)
			}
			if !strings.Contains(err.Error(), tc.msg) || !strings.HasPrefix(err.Error(), "compile: ") {
				t.Fatalf("error %q, want compile: ...%s...", err, tc.msg)
			}
		})
	}
	// Accepted table names; Postgres ignores the table.
	for _, table := range []string{"p.d.t", "my-project.analytics.events", "dataset.events"} {
		if _, err := segment.Compile(def, segment.BigQuery, segment.CompileOptions{TenantID: 1, Now: compileNow, Table: table}); err != nil {
			t.Errorf("table %q: %v", table, err)
		}
	}
	if _, err := segment.Compile(def, segment.Postgres, segment.CompileOptions{TenantID: 1, Now: compileNow}); err != nil {
		t.Errorf("postgres without a table: %v", err)
	}
}

// Windows become occurred_at bounds anchored at Now, whatever time zone Now is given in.
func TestCompileWindows(t *testing.T) {
	def, err := segment.ParseDefinition([]byte(cond(
		`{"type":"frequency","event_type":"e","operator":"gt","value":0,"window_days":30},` +
			`{"type":"monetary","event_type":"e","property":"p","metric":"sum","operator":"gt","value":0,"between_days":[7,90]}`)))
	if err != nil {
		t.Fatal(err)
	}
	o := compileOpts
	o.Now = compileNow.In(time.FixedZone("x", -7*3600))
	q, err := segment.Compile(def, segment.Postgres, o)
	if err != nil {
		t.Fatal(err)
	}
	param := func(v time.Time) string {
		for _, p := range q.Params {
			if pv, ok := p.Value.(time.Time); ok && pv.Equal(v) {
				if pv.Location() != time.UTC {
					t.Errorf("time parameter %v is not in UTC", pv)
				}
				return "$" + p.Name
			}
		}
		t.Fatalf("no parameter %v in %v", v, q.Params)
		return ""
	}
	for _, want := range []string{
		"e.occurred_at >= " + param(daysAgo(30)) + "::timestamptz",
		"e.occurred_at >= " + param(daysAgo(90)) + "::timestamptz AND e.occurred_at < " + param(daysAgo(7)) + "::timestamptz",
		// Every condition is windowed: the scan itself is bounded by the earliest bound.
		"AND e.occurred_at >= " + param(daysAgo(90)) + "::timestamptz\n  GROUP BY",
	} {
		if !strings.Contains(q.SQL, want) {
			t.Errorf("SQL lacks %q:\n%s", want, q.SQL)
		}
	}
}

// Parameters are shared only between equal values: two in-lists that print alike with %v are
// different parameters.
func TestCompileParamsDistinct(t *testing.T) {
	def, err := segment.ParseDefinition([]byte(cond(
		`{"type":"trait","trait":"plan","operator":"in","value":["a","b"]},` +
			`{"type":"trait","trait":"plan","operator":"in","value":["a b"]},` +
			`{"type":"trait","trait":"plan","operator":"in","value":["a","b"]},` +
			`{"type":"trait","trait":"plan","operator":"eq","value":"a b"},` +
			`{"type":"event_property","event_type":"a b","property":"x","operator":"in","value":["a b"]}`)))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dialects {
		q, err := segment.Compile(def, d, compileOpts)
		if err != nil {
			t.Fatal(err)
		}
		var lists [][]string
		for _, p := range q.Params {
			if l, ok := p.Value.([]string); ok {
				lists = append(lists, l)
			}
		}
		// ["a","b"] once, ["a b"] once (the in-list and the event types share it).
		if want := [][]string{{"a", "b"}, {"a b"}}; !reflect.DeepEqual(lists, want) {
			t.Errorf("%s: list parameters %q, want %q", d, lists, want)
		}
	}
}

// ---------------------------------------------------------------------------------------------
// Semantics: the compiled Postgres SQL against a reference evaluator over the same data.

type refEvent struct {
	tenant  int64
	user    string
	typ     string
	at      time.Time
	payload string // a JSON object
}

type refProfile struct {
	tenant int64
	user   string
	traits string // a JSON object
}

type refMember struct {
	tenant, segment int64
	user            string
}

type refData struct {
	events   []refEvent
	profiles []refProfile
	members  []refMember
}

// loadRefData writes the data to warehouse.events, profiles and segment_members.
func loadRefData(t *testing.T, pool *pgxpool.Pool, d refData) {
	t.Helper()
	b := &pgx.Batch{}
	for i, e := range d.events {
		b.Queue(`INSERT INTO warehouse.events (tenant_id, event_id, user_id, event_type, occurred_at, received_at, payload)
			VALUES ($1, $2, $3, $4, $5, $6, ($7::text)::jsonb)`, e.tenant, fmt.Sprintf("ev-%d", i), e.user, e.typ, e.at, compileNow, e.payload)
	}
	for _, p := range d.profiles {
		b.Queue(`INSERT INTO profiles (tenant_id, user_id, traits, first_seen_at, last_seen_at) VALUES ($1, $2, ($3::text)::jsonb, $4, $4)`,
			p.tenant, p.user, p.traits, compileNow)
	}
	for _, m := range d.members {
		b.Queue(`INSERT INTO segment_members (tenant_id, segment_id, user_id, computed_at) VALUES ($1, $2, $3, $4)`, m.tenant, m.segment, m.user, compileNow)
	}
	if err := pool.SendBatch(context.Background(), b).Close(); err != nil {
		t.Fatalf("load data: %v", err)
	}
	// The per-user rollups the loader keeps beside the events, as its repair function builds them.
	if _, err := pool.Exec(context.Background(), `SELECT warehouse.rebuild_user_stats(t) FROM unnest($1::bigint[]) t`, []int64{42, 7}); err != nil {
		t.Fatalf("rebuild user stats: %v", err)
	}
}

// refWorld is one tenant's data, decoded, for the reference evaluator.
type refWorld struct {
	now     time.Time
	users   []string // the universe: the tenant's profiles
	events  map[string][]refEv
	traits  map[string]map[string]any
	members map[int64]map[string]bool
}

type refEv struct {
	typ     string
	at      time.Time
	payload map[string]any
}

func decodeObject(t testing.TB, s string) map[string]any {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		t.Fatalf("test data %q: %v", s, err)
	}
	return m
}

func newRefWorld(t testing.TB, d refData, tenant int64) *refWorld {
	w := &refWorld{now: compileNow, events: map[string][]refEv{}, traits: map[string]map[string]any{}, members: map[int64]map[string]bool{}}
	for _, p := range d.profiles {
		if p.tenant == tenant {
			w.users = append(w.users, p.user)
			w.traits[p.user] = decodeObject(t, p.traits)
		}
	}
	sort.Strings(w.users)
	for _, e := range d.events {
		if e.tenant == tenant {
			if _, ok := w.traits[e.user]; !ok {
				t.Fatalf("test data: user %s has events but no profile", e.user)
			}
			w.events[e.user] = append(w.events[e.user], refEv{typ: e.typ, at: e.at, payload: decodeObject(t, e.payload)})
		}
	}
	for _, m := range d.members {
		if m.tenant == tenant {
			if w.members[m.segment] == nil {
				w.members[m.segment] = map[string]bool{}
			}
			w.members[m.segment][m.user] = true
		}
	}
	return w
}

// eval lists the users matching the definition, sorted.
func (w *refWorld) eval(def *segment.Definition) []string {
	root := segment.Node{Logic: def.Logic, Conditions: def.Conditions, Negate: def.Negate}
	out := []string{}
	for _, u := range w.users {
		if w.node(&root, u) {
			out = append(out, u)
		}
	}
	return out
}

func (w *refWorld) node(n *segment.Node, u string) bool {
	var v bool
	if n.IsGroup() {
		v = n.Logic == "AND"
		for i := range n.Conditions {
			if n.Logic == "AND" {
				v = v && w.node(&n.Conditions[i], u)
			} else {
				v = v || w.node(&n.Conditions[i], u)
			}
		}
	} else {
		v = w.leaf(n, u)
	}
	return v != n.Negate
}

// inWindow applies window_days / between_days (recency has no window of its own).
func (w *refWorld) inWindow(n *segment.Node, at time.Time) bool {
	switch {
	case n.WindowDays != nil:
		return !at.Before(w.now.Add(-time.Duration(*n.WindowDays) * 24 * time.Hour))
	case len(n.BetweenDays) == 2:
		from := w.now.Add(-time.Duration(n.BetweenDays[1]) * 24 * time.Hour)
		to := w.now.Add(-time.Duration(n.BetweenDays[0]) * 24 * time.Hour)
		return !at.Before(from) && at.Before(to)
	}
	return true
}

func (w *refWorld) leaf(n *segment.Node, u string) bool {
	switch n.Type {
	case segment.TypeMonetary:
		var vals []float64
		for _, e := range w.events[u] {
			if e.typ == n.EventType && w.inWindow(n, e.at) {
				if x, ok := refNum(e.payload[n.Property]); ok {
					vals = append(vals, x)
				}
			}
		}
		var agg float64
		switch n.Metric {
		case "sum":
			for _, x := range vals {
				agg += x
			}
		case "count":
			agg = float64(len(vals))
		case "avg":
			if len(vals) == 0 {
				return false
			}
			for _, x := range vals {
				agg += x
			}
			agg /= float64(len(vals))
		case "min", "max":
			if len(vals) == 0 {
				return false
			}
			agg = vals[0]
			for _, x := range vals {
				if n.Metric == "min" && x < agg || n.Metric == "max" && x > agg {
					agg = x
				}
			}
		}
		return refCompare(agg, n.Operator, n.Value.Num)
	case segment.TypeFrequency:
		count := 0
		for _, e := range w.events[u] {
			if e.typ == n.EventType && w.inWindow(n, e.at) {
				count++
			}
		}
		return refCompare(float64(count), n.Operator, n.Value.Num)
	case segment.TypeRecency:
		var latest time.Time
		for _, e := range w.events[u] {
			if e.typ == n.EventType && e.at.After(latest) {
				latest = e.at
			}
		}
		if latest.IsZero() {
			return false // never did it: no recency leaf matches
		}
		cut := w.now.Add(-time.Duration(*n.WindowDays) * 24 * time.Hour)
		cut1 := cut.Add(-24 * time.Hour)
		eq := !latest.After(cut) && latest.After(cut1)
		switch n.Operator {
		case "gt":
			return latest.Before(cut)
		case "gte":
			return !latest.After(cut)
		case "lt":
			return latest.After(cut)
		case "lte":
			return !latest.Before(cut)
		case "eq":
			return eq
		case "neq":
			return !eq
		}
	case segment.TypeEventProperty:
		for _, e := range w.events[u] {
			if e.typ == n.EventType && w.inWindow(n, e.at) && refPred(e.payload, n.Property, n.Operator, n.Value) {
				return true
			}
		}
		return false
	case segment.TypeTrait:
		return refPred(w.traits[u], n.Trait, n.Operator, n.Value)
	case segment.TypeInSegment:
		return w.members[n.SegmentID][u]
	}
	panic("reference: unknown condition " + n.Type)
}

func refCompare(a float64, op string, b float64) bool {
	switch op {
	case "gt":
		return a > b
	case "gte":
		return a >= b
	case "lt":
		return a < b
	case "lte":
		return a <= b
	case "eq":
		return a == b
	case "neq":
		return a != b
	}
	panic("reference: unknown operator " + op)
}

// refNumeric is warehouse.jnum's pattern of numeric strings.
var refNumeric = regexp.MustCompile(`^\s*[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]{1,3})?\s*$`)

// refNum is a JSON value as a number: numbers and numeric strings.
func refNum(v any) (float64, bool) {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	case string:
		if refNumeric.MatchString(x) {
			f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
			return f, err == nil
		}
	}
	return 0, false
}

// refText is a JSON value as text (the test data writes numbers as Postgres prints them).
func refText(v any) (string, bool) {
	switch x := v.(type) {
	case nil:
		return "", false
	case string:
		return x, true
	case json.Number:
		return string(x), true
	case bool:
		return strconv.FormatBool(x), true
	}
	b, _ := json.Marshal(v)
	return string(b), true
}

// refPred tests the value at key of obj; SQL NULL (a missing key, JSON null) fails every test
// except neq (IS DISTINCT FROM) and not_exists.
func refPred(obj map[string]any, key, op string, val *segment.Value) bool {
	v, has := obj[key]
	present := has && v != nil
	switch op {
	case "exists":
		return present
	case "not_exists":
		return !present
	}
	txt, hasTxt := refText(v)
	num, hasNum := refNum(v)
	switch op {
	case "contains":
		return hasTxt && strings.Contains(strings.ToLower(txt), strings.ToLower(val.Str))
	case "starts_with":
		return hasTxt && strings.HasPrefix(strings.ToLower(txt), strings.ToLower(val.Str))
	case "in":
		for _, x := range val.List {
			if hasTxt && txt == x.Text() {
				return true
			}
		}
		return false
	case "gt", "gte", "lt", "lte":
		return hasNum && refCompare(num, op, val.Num)
	case "eq":
		if val.Kind == segment.KindNumber {
			return hasNum && num == val.Num
		}
		return hasTxt && txt == val.Text()
	case "neq":
		if val.Kind == segment.KindNumber {
			return !hasNum || num != val.Num
		}
		return !hasTxt || txt != val.Text()
	}
	panic("reference: unknown operator " + op)
}

// runUsers runs the compiled query and returns the user ids, sorted; a user listed twice fails.
func runUsers(t *testing.T, pool *pgxpool.Pool, q *segment.Query) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), q.SQL, q.Args()...)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, q.Display())
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("run: %v\n%s", err, q.Display())
	}
	sort.Strings(ids)
	if c := slices.Compact(slices.Clone(ids)); len(c) != len(ids) {
		t.Fatalf("a user is returned twice: %v\n%s", ids, q.Display())
	}
	if ids == nil {
		ids = []string{}
	}
	return ids
}

// diffUsers describes how got differs from want.
func diffUsers(want, got []string) string {
	w, g := map[string]bool{}, map[string]bool{}
	for _, u := range want {
		w[u] = true
	}
	for _, u := range got {
		g[u] = true
	}
	var missing, extra []string
	for _, u := range want {
		if !g[u] {
			missing = append(missing, u)
		}
	}
	for _, u := range got {
		if !w[u] {
			extra = append(extra, u)
		}
	}
	return fmt.Sprintf("missing %v, extra %v", missing, extra)
}

func ev(tenant int64, user, typ string, days float64, payload string) refEvent {
	return refEvent{tenant: tenant, user: user, typ: typ, at: daysAgo(days), payload: payload}
}

// handData is a small data set with boundary cases. Tenant 7 reuses tenant 42's user ids with
// data that would change every answer if it leaked into tenant 42's.
func handData() refData {
	return refData{
		events: []refEvent{
			ev(42, "u1", "order_completed", 40, `{"amount":80}`),
			ev(42, "u1", "order_completed", 35, `{"amount":"30.5","currency":"EUR"}`),
			ev(42, "u1", "page_view", 45, `{"path":"/Pricing"}`),
			ev(42, "u2", "order_completed", 2, `{"amount":200,"currency":"USD","coupon":"X1"}`),
			ev(42, "u2", "order_completed", 10, `{"amount":15,"qty":1}`),
			ev(42, "u2", "page_view", 1, `{"path":"/home"}`),
			ev(42, "u2", "page_view", 3, `{"path":"/pricing"}`),
			ev(42, "u3", "page_view", 30, `{"path":"/pricing/enterprise"}`), // exactly 30 days ago
			ev(42, "u3", "page_view", 5, `{"path":"/blog"}`),
			ev(42, "u5", "order_completed", 7, `{"amount":"12.50","qty":2}`), // exactly 7 days ago
			ev(42, "u5", "order_completed", 3, `{"amount":null,"coupon":null}`),
			ev(42, "u5", "signup", 100, `{"source":"ads"}`),
			ev(42, "u6", "order_completed", 0.5, `{"amount":100,"gift":true,"currency":1}`),
			ev(42, "u6", "order_completed", 20, `{"amount":"abc","gift":"true"}`),
			ev(42, "u6", "page_view", 31, `{}`), // exactly 31 days ago
			ev(42, "u7", "signup", 29.9, `{"source":"organic"}`),
			ev(42, "u7", "page_view", 200, `{"path":"/Pricing"}`),
			ev(42, "u8", "order_completed", 60, `{"amount":-20}`),
			ev(42, "u8", "order_completed", 89, `{"amount":120,"qty":1}`),
			ev(42, "u9", "page_view", 30.5, `{"path":"/home"}`),
			ev(42, "u9", "signup", 1, `{"source":"ads"}`),

			ev(7, "u1", "order_completed", 1, `{"amount":1000}`),
			ev(7, "u2", "page_view", 1, `{"path":"/pricing"}`),
			ev(7, "u3", "order_completed", 50, `{"amount":500}`),
			ev(7, "u4", "order_completed", 3, `{"amount":300}`),
			ev(7, "u4", "page_view", 2, `{"path":"/pricing"}`),
			ev(7, "u10", "order_completed", 1, `{"amount":999}`),
			ev(7, "u10", "page_view", 1, `{"path":"/pricing"}`),
		},
		profiles: []refProfile{
			{42, "u1", `{"plan":"pro","country":"US","age":34,"vip":true}`},
			{42, "u2", `{"plan":"free","country":"DE","age":"29"}`},
			{42, "u3", `{"plan":"Pro","email":"Ann@Example.com"}`},
			{42, "u4", `{}`},
			{42, "u5", `{"plan":null,"country":"FR"}`},
			{42, "u6", `{"plan":"enterprise","age":51.5}`},
			{42, "u7", `{"country":"US","tags":"a,b"}`},
			{42, "u8", `{"vip":false}`},
			{42, "u9", `{}`},
			{7, "u1", `{"plan":"free"}`},
			{7, "u2", `{"plan":"pro","vip":true}`},
			{7, "u3", `{"plan":"pro"}`},
			{7, "u4", `{"plan":"pro","country":"US","age":99}`},
			{7, "u10", `{"plan":"pro","country":"US"}`},
		},
		members: []refMember{
			{42, 3, "u1"}, {42, 3, "u4"}, {42, 4, "u2"}, {42, 4, "u6"},
			{7, 3, "u2"}, {7, 3, "u3"}, {7, 3, "u10"}, {7, 4, "u1"}, {7, 4, "u9"},
		},
	}
}

func TestCompileSemanticsHand(t *testing.T) {
	pool := testenv.OpenDB(t).Pool
	data := handData()
	loadRefData(t, pool, data)
	world := newRefWorld(t, data, 42)

	type row struct {
		name string
		def  string
		want []string // the answer worked out by hand; nil: only SQL == reference
	}
	rows := []row{
		{"seed example", seedDefinition, []string{"u1", "u6"}},
		{"frequency eq 0 in 30 days includes users without events", cond(`{"type":"frequency","event_type":"order_completed","operator":"eq","value":0,"window_days":30}`),
			[]string{"u1", "u3", "u4", "u7", "u8", "u9"}},
		{"recency eq 30", cond(`{"type":"recency","event_type":"page_view","operator":"eq","window_days":30}`), []string{"u9"}},
		{"recency lte 30", cond(`{"type":"recency","event_type":"page_view","operator":"lte","window_days":30}`), []string{"u2", "u3"}},
		{"recency gte 31 includes the boundary", cond(`{"type":"recency","event_type":"page_view","operator":"gte","window_days":31}`), []string{"u1", "u6", "u7"}},
		{"recency gt 31 excludes the boundary", cond(`{"type":"recency","event_type":"page_view","operator":"gt","window_days":31}`), []string{"u1", "u7"}},
		{"recency neq 0", cond(`{"type":"recency","event_type":"signup","operator":"neq","window_days":0}`), []string{"u5", "u7", "u9"}},
		{"recency lt 0 never matches past events", cond(`{"type":"recency","event_type":"signup","operator":"lt","window_days":0}`), []string{}},
		{"negated recency includes users who never did it", cond(`{"type":"recency","event_type":"signup","operator":"lte","window_days":30,"negate":true}`),
			[]string{"u1", "u2", "u3", "u4", "u5", "u6", "u8"}},
		{"in_segment is tenant-scoped", cond(`{"type":"in_segment","segment_id":3}`), []string{"u1", "u4"}},
		{"in_segment OR events includes members without events", `{"logic":"OR","conditions":[{"type":"in_segment","segment_id":3},{"type":"frequency","event_type":"page_view","operator":"gte","value":1,"window_days":7}]}`,
			[]string{"u1", "u2", "u3", "u4"}},
		{"negated in_segment AND events", cond(`{"type":"in_segment","segment_id":4,"negate":true},{"type":"frequency","event_type":"order_completed","operator":"gte","value":1}`),
			[]string{"u1", "u5", "u8"}},
		{"trait eq is case-sensitive", cond(`{"type":"trait","trait":"plan","operator":"eq","value":"pro"}`), []string{"u1"}},
		{"trait contains is case-insensitive", cond(`{"type":"trait","trait":"plan","operator":"contains","value":"PRO"}`), []string{"u1", "u3"}},
		{"trait starts_with is case-insensitive", cond(`{"type":"trait","trait":"email","operator":"starts_with","value":"ann@"}`), []string{"u3"}},
		{"trait neq counts a missing trait as different", cond(`{"type":"trait","trait":"plan","operator":"neq","value":"pro"}`),
			[]string{"u2", "u3", "u4", "u5", "u6", "u7", "u8", "u9"}},
		{"trait gt reads numeric strings", cond(`{"type":"trait","trait":"age","operator":"gt","value":28}`), []string{"u1", "u2", "u6"}},
		{"trait eq number reads numeric strings", cond(`{"type":"trait","trait":"age","operator":"eq","value":29}`), []string{"u2"}},
		{"trait neq number", cond(`{"type":"trait","trait":"age","operator":"neq","value":29}`), []string{"u1", "u3", "u4", "u5", "u6", "u7", "u8", "u9"}},
		{"trait eq boolean", cond(`{"type":"trait","trait":"vip","operator":"eq","value":false}`), []string{"u8"}},
		{"trait not_exists counts null", cond(`{"type":"trait","trait":"plan","operator":"not_exists"}`), []string{"u4", "u5", "u7", "u8", "u9"}},
		{"trait exists", cond(`{"type":"trait","trait":"country","operator":"exists"}`), []string{"u1", "u2", "u5", "u7"}},
		{"trait in", cond(`{"type":"trait","trait":"country","operator":"in","value":["DE","FR","us"]}`), []string{"u2", "u5"}},
		{"trait in with a number", cond(`{"type":"trait","trait":"age","operator":"in","value":[34,"29"]}`), []string{"u1", "u2"}},
		{"two in-lists that print alike", cond(`{"type":"trait","trait":"plan","operator":"in","value":["pro","free"]},{"type":"trait","trait":"plan","operator":"in","value":["pro free"]}`), []string{}},
		{"event_property contains in 7 days", cond(`{"type":"event_property","event_type":"page_view","property":"path","operator":"contains","value":"pricing","window_days":7}`), []string{"u2"}},
		{"event_property contains all time", cond(`{"type":"event_property","event_type":"page_view","property":"path","operator":"contains","value":"pricing"}`), []string{"u1", "u2", "u3", "u7"}},
		{"event_property neq counts a missing property", cond(`{"type":"event_property","event_type":"page_view","property":"path","operator":"neq","value":"/home"}`),
			[]string{"u1", "u2", "u3", "u6", "u7"}},
		{"event_property eq boolean matches the string too", cond(`{"type":"event_property","event_type":"order_completed","property":"gift","operator":"eq","value":true}`), []string{"u6"}},
		{"event_property eq number reads numeric strings", cond(`{"type":"event_property","event_type":"order_completed","property":"amount","operator":"eq","value":12.5}`), []string{"u5"}},
		{"event_property eq string compares text", cond(`{"type":"event_property","event_type":"order_completed","property":"amount","operator":"eq","value":"12.5"}`), []string{}},
		{"event_property exists ignores null", cond(`{"type":"event_property","event_type":"order_completed","property":"coupon","operator":"exists"}`), []string{"u2"}},
		{"event_property in with a number", cond(`{"type":"event_property","event_type":"order_completed","property":"currency","operator":"in","value":[1,"EUR"]}`), []string{"u1", "u6"}},
		{"event_property window boundary is inclusive", cond(`{"type":"event_property","event_type":"order_completed","property":"qty","operator":"gte","value":2,"window_days":7}`), []string{"u5"}},
		{"monetary sum with a numeric string", cond(`{"type":"monetary","event_type":"order_completed","property":"amount","metric":"sum","operator":"gt","value":110}`), []string{"u1", "u2"}},
		{"monetary avg ignores non-numbers", cond(`{"type":"monetary","event_type":"order_completed","property":"amount","metric":"avg","operator":"gte","value":50}`), []string{"u1", "u2", "u6", "u8"}},
		{"monetary count counts numbers", cond(`{"type":"monetary","event_type":"order_completed","property":"amount","metric":"count","operator":"eq","value":2}`), []string{"u1", "u2", "u8"}},
		{"monetary count of none is 0", cond(`{"type":"monetary","event_type":"order_completed","property":"amount","metric":"count","operator":"lt","value":1}`), []string{"u3", "u4", "u7", "u9"}},
		{"monetary sum of none is 0", cond(`{"type":"monetary","event_type":"order_completed","property":"amount","metric":"sum","operator":"lte","value":0,"window_days":30}`),
			[]string{"u1", "u3", "u4", "u7", "u8", "u9"}},
		{"monetary min of none never matches", cond(`{"type":"monetary","event_type":"order_completed","property":"amount","metric":"min","operator":"lt","value":1000}`),
			[]string{"u1", "u2", "u5", "u6", "u8"}},
		{"monetary min negative", cond(`{"type":"monetary","event_type":"order_completed","property":"amount","metric":"min","operator":"lt","value":0}`), []string{"u8"}},
		{"monetary max", cond(`{"type":"monetary","event_type":"order_completed","property":"amount","metric":"max","operator":"eq","value":120}`), []string{"u8"}},
		{"between_days excludes its recent end", cond(`{"type":"frequency","event_type":"order_completed","operator":"gt","value":0,"between_days":[7,30]}`), []string{"u2", "u6"}},
		{"between_days includes its far end", cond(`{"type":"frequency","event_type":"page_view","operator":"gt","value":0,"between_days":[0,30]}`), []string{"u2", "u3"}},
		{"did not spend over 100 in 7 days", cond(`{"type":"monetary","event_type":"order_completed","property":"amount","metric":"sum","operator":"gt","value":100,"window_days":7,"negate":true}`),
			[]string{"u1", "u3", "u4", "u5", "u6", "u7", "u8", "u9"}},
		{"negated group", `{"logic":"AND","conditions":[{"type":"frequency","event_type":"order_completed","operator":"gte","value":1},{"logic":"OR","negate":true,"conditions":[{"type":"event_property","event_type":"page_view","property":"path","operator":"contains","value":"pricing","window_days":7},{"type":"trait","trait":"plan","operator":"eq","value":"pro"}]}]}`,
			[]string{"u5", "u6", "u8"}},
		{"negated definition", `{"logic":"OR","negate":true,"conditions":[{"type":"frequency","event_type":"order_completed","operator":"gte","value":1},{"type":"trait","trait":"country","operator":"exists"}]}`,
			[]string{"u3", "u4", "u9"}},
		{"event type nobody has", cond(`{"type":"frequency","event_type":"no_such_event","operator":"gte","value":0}`), []string{"u1", "u2", "u3", "u4", "u5", "u6", "u7", "u8", "u9"}},
	}
	// The definitions of an earlier throwaway test (scratch_test.go).
	for i, d := range []string{
		`{"logic":"AND","conditions":[{"type":"monetary","event_type":"order_completed","property":"amount","metric":"sum","operator":"gte","value":100},{"type":"recency","event_type":"order_completed","operator":"gt","window_days":30}]}`,
		`{"logic":"OR","conditions":[{"type":"trait","trait":"plan","operator":"neq","value":"pro"},{"type":"event_property","event_type":"page_view","property":"path","operator":"contains","value":"pricing","window_days":7}]}`,
		`{"logic":"AND","conditions":[{"type":"frequency","event_type":"order_completed","operator":"eq","value":0}]}`,
		`{"logic":"AND","conditions":[{"type":"monetary","event_type":"order_completed","property":"amount","metric":"sum","operator":"gt","value":100,"window_days":30},{"logic":"OR","negate":true,"conditions":[{"type":"monetary","event_type":"order_completed","property":"amount","metric":"sum","operator":"gt","value":100,"between_days":[0,1]}]}]}`,
		`{"logic":"AND","conditions":[{"type":"recency","event_type":"order_completed","operator":"lte","window_days":7},{"type":"in_segment","segment_id":3,"negate":true}]}`,
	} {
		rows = append(rows, row{name: fmt.Sprintf("mixed %d", i+1), def: d})
	}
	for _, name := range sortedKeys(goldenDefinitions(t)) {
		rows = append(rows, row{name: "golden " + name, def: string(goldenDefinitions(t)[name])})
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			def, err := segment.ParseDefinition([]byte(r.def))
			if err != nil {
				t.Fatalf("ParseDefinition: %v", err)
			}
			q, err := segment.Compile(def, segment.Postgres, compileOpts)
			if err != nil {
				t.Fatal(err)
			}
			ref := world.eval(def)
			if r.want != nil && !reflect.DeepEqual(ref, r.want) {
				t.Errorf("reference evaluator: %v, want %v (%s)", ref, r.want, diffUsers(r.want, ref))
			}
			got := runUsers(t, pool, q)
			if !reflect.DeepEqual(got, ref) {
				t.Errorf("SQL returned %v, reference %v: %s\n%s", got, ref, diffUsers(ref, got), q.Display())
			}
			// The count and sample wrappers agree.
			var total int64
			if err := pool.QueryRow(context.Background(), q.Count(), q.Args()...).Scan(&total); err != nil {
				t.Fatalf("count: %v", err)
			}
			if total != int64(len(got)) {
				t.Errorf("Count() = %d, want %d", total, len(got))
			}
			srows, err := pool.Query(context.Background(), q.CountAndSample(2), q.Args()...)
			if err != nil {
				t.Fatalf("sample: %v", err)
			}
			n := 0
			for srows.Next() {
				var u string
				var tot int64
				if err := srows.Scan(&u, &tot); err != nil {
					t.Fatal(err)
				}
				if tot != int64(len(got)) || !slices.Contains(got, u) {
					t.Errorf("sample row (%s, %d) not in %v", u, tot, got)
				}
				n++
			}
			if srows.Err() != nil {
				t.Fatal(srows.Err())
			}
			if n != min(2, len(got)) {
				t.Errorf("sample has %d rows, want %d", n, min(2, len(got)))
			}
		})
	}
}

// ---------------------------------------------------------------------------------------------
// Randomized: random definitions over a random data set.

var (
	randEventTypes = []string{"order_completed", "page_view", "signup", "never_seen"}
	randProps      = []string{"amount", "path", "qty", "currency", "gift", "missing"}
	randTraits     = []string{"plan", "country", "age", "vip", "email", "missing"}
	randNums       = []float64{-5, 0, 1, 2, 12.5, 15, 20, 29, 30.5, 34, 50, 51.5, 80, 100, 100.5, 120, 200}
	randStrings    = []string{"pro", "Pro", "free", "enterprise", "/pricing", "/Pricing", "/home", "/blog", "pri", "/", "US", "us", "DE",
		"12.50", "12.5", "30.5", "true", "abc", "EUR", "a,b", "ann@example.com"}
	randSubstrings = []string{"pri", "PRI", "/", "pro", "e", "/home", "12", "us", "a,", "@EXAMPLE.com", "x"}
	randWindows    = []int{1, 2, 7, 30, 45, 90}
	randBetween    = [][]int{{0, 7}, {7, 30}, {1, 45}, {30, 90}, {0, 1}}
	randRecency    = []int{0, 1, 2, 5, 7, 30, 45, 90}
	randNumericOps = []string{"gt", "gte", "lt", "lte", "eq", "neq"}
	randTraitOps   = []string{"eq", "neq", "contains", "starts_with", "in", "exists", "not_exists", "gt", "lt"}
	randPropOps    = []string{"eq", "neq", "contains", "starts_with", "in", "exists", "gt", "gte", "lt", "lte"}
	randMetrics    = []string{"sum", "avg", "min", "max", "count"}
)

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

func randScalar(r *rand.Rand) segment.Value {
	switch n := r.IntN(20); {
	case n < 10:
		return *strv(pick(r, randStrings))
	case n < 17:
		return *numv(pick(r, randNums))
	default:
		return *boolv(r.IntN(2) == 0)
	}
}

func randWindow(r *rand.Rand, n *segment.Node) {
	switch r.IntN(8) {
	case 0, 1, 2:
	case 3, 4, 5:
		n.WindowDays = new(pick(r, randWindows))
	default:
		n.BetweenDays = slices.Clone(pick(r, randBetween))
	}
}

func randOperand(r *rand.Rand, op string) *segment.Value {
	switch op {
	case "exists", "not_exists":
		return nil
	case "contains", "starts_with":
		return strv(pick(r, randSubstrings))
	case "in":
		list := make([]segment.Value, 1+r.IntN(3))
		for i := range list {
			list[i] = randScalar(r)
		}
		return listv(list...)
	case "gt", "gte", "lt", "lte":
		return numv(pick(r, randNums))
	}
	v := randScalar(r)
	return &v
}

func randLeaf(r *rand.Rand) segment.Node {
	n := segment.Node{Negate: r.IntN(6) == 0}
	switch r.IntN(6) {
	case 0:
		n.Type, n.EventType, n.Property = segment.TypeMonetary, pick(r, randEventTypes[:2]), pick(r, []string{"amount", "amount", "qty", "path"})
		n.Metric, n.Operator, n.Value = pick(r, randMetrics), pick(r, randNumericOps), numv(pick(r, randNums))
		randWindow(r, &n)
	case 1:
		n.Type, n.EventType, n.Operator = segment.TypeRecency, pick(r, randEventTypes), pick(r, randNumericOps)
		n.WindowDays = new(pick(r, randRecency))
	case 2:
		n.Type, n.EventType, n.Operator = segment.TypeFrequency, pick(r, randEventTypes), pick(r, randNumericOps)
		n.Value = numv(float64(pick(r, []int{0, 0, 1, 2, 3, 5})))
		randWindow(r, &n)
	case 3:
		n.Type, n.Trait, n.Operator = segment.TypeTrait, pick(r, randTraits), pick(r, randTraitOps)
		n.Value = randOperand(r, n.Operator)
	case 4:
		n.Type, n.EventType, n.Property, n.Operator = segment.TypeEventProperty, pick(r, randEventTypes), pick(r, randProps), pick(r, randPropOps)
		n.Value = randOperand(r, n.Operator)
		randWindow(r, &n)
	default:
		n.Type, n.SegmentID = segment.TypeInSegment, int64(pick(r, []int{3, 3, 4, 5}))
	}
	return n
}

func randGroup(r *rand.Rand, depth int) segment.Node {
	g := segment.Node{Logic: pick(r, []string{"AND", "OR"}), Negate: r.IntN(6) == 0}
	for range 1 + r.IntN(3) {
		if depth < 4 && r.IntN(4) == 0 {
			g.Conditions = append(g.Conditions, randGroup(r, depth+1))
		} else {
			g.Conditions = append(g.Conditions, randLeaf(r))
		}
	}
	return g
}

// randDefinition builds a random definition and validates it through its JSON.
func randDefinition(t testing.TB, r *rand.Rand) *segment.Definition {
	g := randGroup(r, 1)
	def := &segment.Definition{Logic: g.Logic, Conditions: g.Conditions, Negate: g.Negate}
	parsed, err := segment.ParseDefinition(def.JSON())
	if err != nil {
		t.Fatalf("random definition is invalid: %v\n%s", err, def.JSON())
	}
	return parsed
}

// randJSONObject writes the keys (in order) whose value function returns a literal.
func randJSONObject(kv ...any) string {
	var parts []string
	for i := 0; i < len(kv); i += 2 {
		if lit := kv[i+1].(string); lit != "" {
			parts = append(parts, strconv.Quote(kv[i].(string))+":"+lit)
		}
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// randLiteral picks one of the JSON literals; "" leaves the key out.
func randLiteral(r *rand.Rand, lits ...string) string { return pick(r, lits) }

func randAmount(r *rand.Rand) string {
	switch r.IntN(10) {
	case 0:
		return ""
	case 1:
		return "null"
	case 2:
		return pick(r, []string{`"12.50"`, `"30.5"`, `" 7 "`, `"1e2"`, `"abc"`, `""`})
	case 3:
		return strconv.FormatFloat(float64(r.IntN(400))/4, 'f', -1, 64)
	case 4:
		return strconv.Itoa(-r.IntN(30))
	}
	return strconv.Itoa(1 + r.IntN(300))
}

func randData(r *rand.Rand) refData {
	var d refData
	for _, tenant := range []struct {
		id    int64
		users int
	}{{42, 200}, {7, 60}} {
		for i := range tenant.users {
			u := fmt.Sprintf("r%03d", i)
			d.profiles = append(d.profiles, refProfile{tenant.id, u, randJSONObject(
				"plan", randLiteral(r, `"pro"`, `"Pro"`, `"free"`, `"enterprise"`, "null", ""),
				"country", randLiteral(r, `"US"`, `"DE"`, `"us"`, `"FR"`, ""),
				"age", randLiteral(r, strconv.Itoa(18+r.IntN(50)), `"29"`, `"abc"`, "51.5", "", ""),
				"vip", randLiteral(r, "true", "false", `"true"`, ""),
				"email", randLiteral(r, `"ann@example.com"`, `"BOB@EXAMPLE.COM"`, `"x@y.org"`, "", ""),
			)})
			if r.IntN(3) == 0 {
				d.members = append(d.members, refMember{tenant.id, 3, u})
			}
			if r.IntN(10) == 0 {
				d.members = append(d.members, refMember{tenant.id, 4, u})
			}
			if r.IntN(5) == 0 {
				continue // a profile without events
			}
			for range r.IntN(13) {
				var at time.Time
				if r.IntN(5) == 0 {
					at = daysAgo(float64(r.IntN(100))) // on a day boundary
				} else {
					at = compileNow.Add(-time.Duration(r.Int64N(100*24*3600)) * time.Second)
				}
				e := refEvent{tenant: tenant.id, user: u, at: at}
				switch n := r.IntN(20); {
				case n < 9:
					e.typ = "order_completed"
					e.payload = randJSONObject("amount", randAmount(r), "qty", randLiteral(r, "1", "2", "3", `"2"`, ""),
						"currency", randLiteral(r, `"EUR"`, `"USD"`, `"eur"`, "1", ""), "gift", randLiteral(r, "true", "false", `"true"`, "", ""))
				case n < 17:
					e.typ = "page_view"
					e.payload = randJSONObject("path", randLiteral(r, `"/pricing"`, `"/Pricing"`, `"/home"`, `"/blog/pricing"`, `"/"`, `"/pricing/enterprise"`, "null", ""),
						"amount", randLiteral(r, "", "", "", "5"))
				default:
					e.typ = "signup"
					e.payload = randJSONObject("source", randLiteral(r, `"ads"`, `"organic"`))
				}
				d.events = append(d.events, e)
			}
		}
	}
	return d
}

func TestCompileSemanticsRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(20261121, 42))
	pool := testenv.OpenDB(t).Pool
	data := randData(r)
	loadRefData(t, pool, data)
	world := newRefWorld(t, data, 42)
	failures := 0
	for i := range 300 {
		def := randDefinition(t, r)
		q, err := segment.Compile(def, segment.Postgres, compileOpts)
		if err != nil {
			t.Fatalf("definition %d: %v\n%s", i, err, def.JSON())
		}
		if _, err := segment.Compile(def, segment.BigQuery, compileOpts); err != nil {
			t.Fatalf("definition %d, bigquery: %v\n%s", i, err, def.JSON())
		}
		got, ref := runUsers(t, pool, q), world.eval(def)
		if !reflect.DeepEqual(got, ref) {
			t.Errorf("definition %d: SQL returned %d users, reference %d: %s\n%s\n%s", i, len(got), len(ref), diffUsers(ref, got), def.JSON(), q.Display())
			if failures++; failures == 5 {
				t.Fatal("too many failures")
			}
		}
	}
}

// The reference evaluator is not vacuous: random definitions give varied answers.
func TestRandomDefinitionsVary(t *testing.T) {
	r := rand.New(rand.NewPCG(20261121, 42))
	data := randData(r)
	world := newRefWorld(t, data, 42)
	empty, all := 0, 0
	for range 300 {
		n := len(world.eval(randDefinition(t, r)))
		if n == 0 {
			empty++
		}
		if n == len(world.users) {
			all++
		}
	}
	if 300-empty-all < 100 {
		t.Fatalf("of 300 random definitions %d match nobody and %d everybody", empty, all)
	}
	t.Logf("of 300 random definitions %d match nobody and %d everybody", empty, all)
}
