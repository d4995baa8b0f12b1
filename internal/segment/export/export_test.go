package export

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"github.com/cohort-dev/cohort/internal/errs"
)

// base is not in UTC and has sub-millisecond digits: every format must write it in UTC,
// truncated to the millisecond.
var base = time.Date(2026, 11, 21, 10, 30, 0, 123_456_789, time.FixedZone("CET", 3600))

const baseUTC = "2026-11-21T09:30:00.123Z"

var allTraitKeys = []string{"plan", "age", "vip", "tags", "addr", "email"}

// genRow is the i-th member of the big test exports: it has a score except every fifth row,
// and a mix of trait types, missing keys and nulls.
func genRow(i int) Row {
	r := Row{
		UserID:     fmt.Sprintf("u%07d", i),
		ComputedAt: base.Add(time.Duration(i) * time.Millisecond),
		Traits: map[string]any{
			"age":         float64(i % 90),
			"email":       fmt.Sprintf("user%d@example.com", i), // unique: a dictionary that keeps growing
			"unrequested": "x",
		},
	}
	if i%5 != 0 {
		s := float64(i%10001) / 100
		r.Score = &s
	}
	switch i % 4 {
	case 0:
		r.Traits["plan"] = "pro"
	case 1:
		r.Traits["plan"] = "free"
	case 2:
		r.Traits["plan"] = nil
	} // 3: missing
	if i%3 == 0 {
		r.Traits["vip"] = true
	}
	if i%1000 == 0 {
		r.Traits["tags"] = []any{"a", "b"}
		r.Traits["addr"] = map[string]any{"city": "Oslo", "zip": "0150"}
	}
	return r
}

// wantTraitText is the expected text of a genRow trait, computed independently of the
// writer's fast paths: encoding/json for anything but strings.
func wantTraitText(t *testing.T, v any) (string, bool) {
	t.Helper()
	switch x := v.(type) {
	case nil:
		return "", false
	case string:
		return x, true
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

// closeRecorder is an output that records whether the writer closed it.
type closeRecorder struct {
	bytes.Buffer
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

func writeAll(t testing.TB, f Format, o Options, rows func(i int) Row, n int) []byte {
	t.Helper()
	var out closeRecorder
	w, err := NewWriter(&out, f, o)
	if err != nil {
		t.Fatalf("NewWriter: %v", err)
	}
	for i := range n {
		if err := w.Write(rows(i)); err != nil {
			t.Fatalf("Write row %d: %v", i, err)
		}
	}
	if got := w.Rows(); got != int64(n) {
		t.Fatalf("Rows() = %d before Close, want %d", got, n)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if out.closed {
		t.Fatal("Close closed the underlying writer")
	}
	if err := w.Write(Row{UserID: "late", ComputedAt: base}); err == nil {
		t.Fatal("Write after Close succeeded")
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	return out.Bytes()
}

type wantColumn struct {
	name     string
	typ      format.Type
	optional bool
	logical  string // "string", "timestamp-millis-utc" or "" (none)
}

func TestParquet(t *testing.T) {
	userID := wantColumn{"user_id", format.ByteArray, false, "string"}
	computedAt := wantColumn{"computed_at", format.Int64, false, "timestamp-millis-utc"}
	score := wantColumn{"score", format.Double, true, ""}
	trait := func(k string) wantColumn { return wantColumn{k, format.ByteArray, true, "string"} }

	tests := []struct {
		name      string
		opts      Options
		rows      int
		wantCols  []wantColumn
		wantGroup []int64
	}{
		{
			name:      "user_id and computed_at only",
			rows:      250_001,
			wantCols:  []wantColumn{userID, computedAt},
			wantGroup: []int64{100_000, 100_000, 50_001},
		},
		{
			name:      "score only",
			opts:      Options{WithScore: true},
			rows:      250_001,
			wantCols:  []wantColumn{userID, computedAt, score},
			wantGroup: []int64{100_000, 100_000, 50_001},
		},
		{
			name: "score and traits, duplicate key written once, unsorted order kept",
			opts: Options{WithScore: true, TraitKeys: []string{"plan", "age", "vip", "plan", "tags", "addr", "email"}},
			rows: 250_001,
			wantCols: []wantColumn{userID, computedAt, score,
				trait("plan"), trait("age"), trait("vip"), trait("tags"), trait("addr"), trait("email")},
			wantGroup: []int64{100_000, 100_000, 50_001},
		},
		{
			name:     "traits without score, exactly one row group",
			opts:     Options{TraitKeys: []string{"vip", "plan"}},
			rows:     100_000,
			wantCols: []wantColumn{userID, computedAt, trait("vip"), trait("plan")},
			// one full group; the writer must not leave an empty one behind
			wantGroup: []int64{100_000},
		},
		{
			name:     "no rows",
			opts:     Options{WithScore: true, TraitKeys: []string{"plan"}},
			rows:     0,
			wantCols: []wantColumn{userID, computedAt, score, trait("plan")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := writeAll(t, Parquet, tt.opts, genRow, tt.rows)
			f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
			if err != nil {
				t.Fatalf("OpenFile: %v", err)
			}
			if f.NumRows() != int64(tt.rows) {
				t.Fatalf("NumRows = %d, want %d", f.NumRows(), tt.rows)
			}
			checkSchema(t, f.Metadata().Schema, tt.wantCols)

			groups := f.Metadata().RowGroups
			var sizes []int64
			for _, g := range groups {
				sizes = append(sizes, g.NumRows)
				for _, c := range g.Columns {
					if c.MetaData.Codec != format.Snappy {
						t.Errorf("column %v codec %v, want SNAPPY", c.MetaData.PathInSchema, c.MetaData.Codec)
					}
					for _, e := range c.MetaData.Encoding {
						// The encodings every reader supports; no delta encodings.
						switch e {
						case format.Plain, format.RLE, format.RLEDictionary, format.PlainDictionary:
						default:
							t.Errorf("column %v uses encoding %v", c.MetaData.PathInSchema, e)
						}
					}
				}
			}
			if fmt.Sprint(sizes) != fmt.Sprint(tt.wantGroup) && !(len(sizes) == 0 && len(tt.wantGroup) == 0) {
				t.Fatalf("row group sizes %v, want %v", sizes, tt.wantGroup)
			}

			keys := dedupe(tt.opts.TraitKeys)
			r := parquet.NewReader(bytes.NewReader(data))
			defer r.Close()
			buf := make([]parquet.Row, 1000)
			i := 0
			for {
				n, err := r.ReadRows(buf)
				for _, row := range buf[:n] {
					checkParquetRow(t, i, row, genRow(i), tt.opts.WithScore, keys)
					i++
				}
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("ReadRows after %d rows: %v", i, err)
				}
				if t.Failed() {
					t.FailNow()
				}
			}
			if i != tt.rows {
				t.Fatalf("read %d rows, want %d", i, tt.rows)
			}
		})
	}
}

func dedupe(keys []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

func checkSchema(t *testing.T, elems []format.SchemaElement, want []wantColumn) {
	t.Helper()
	if len(elems) != len(want)+1 {
		t.Fatalf("schema has %d elements, want root + %d columns", len(elems), len(want))
	}
	if n, _ := elems[0].NumChildren.Get(); int(n) != len(want) {
		t.Fatalf("root has %d children, want %d", n, len(want))
	}
	for i, w := range want {
		e := elems[i+1]
		if e.Name != w.name {
			t.Errorf("column %d is %q, want %q", i, e.Name, w.name)
		}
		if typ, _ := e.Type.Get(); typ != w.typ {
			t.Errorf("column %q type %v, want %v", w.name, typ, w.typ)
		}
		wantRep := format.Required
		if w.optional {
			wantRep = format.Optional
		}
		if rep, _ := e.RepetitionType.Get(); rep != wantRep {
			t.Errorf("column %q repetition %v, want %v", w.name, rep, wantRep)
		}
		switch lt := e.LogicalType.Value.(type) {
		case nil:
			if w.logical != "" {
				t.Errorf("column %q has no logical type, want %s", w.name, w.logical)
			}
		case *format.StringType:
			if w.logical != "string" {
				t.Errorf("column %q logical type STRING, want %q", w.name, w.logical)
			}
		case *format.TimestampType:
			_, millis := lt.Unit.Value.(*format.MilliSeconds)
			if w.logical != "timestamp-millis-utc" || !millis || !lt.IsAdjustedToUTC {
				t.Errorf("column %q logical type %v, want %q", w.name, lt, w.logical)
			}
		default:
			t.Errorf("column %q logical type %v, want %q", w.name, lt, w.logical)
		}
	}
}

func checkParquetRow(t *testing.T, i int, row parquet.Row, in Row, withScore bool, keys []string) {
	t.Helper()
	wantLen := 2 + len(keys)
	if withScore {
		wantLen++
	}
	if len(row) != wantLen {
		t.Fatalf("row %d has %d values, want %d", i, len(row), wantLen)
	}
	for c, v := range row {
		if v.Column() != c {
			t.Fatalf("row %d value %d is of column %d", i, c, v.Column())
		}
	}
	if got := string(row[0].ByteArray()); got != in.UserID {
		t.Errorf("row %d user_id %q, want %q", i, got, in.UserID)
	}
	if got, want := row[1].Int64(), in.ComputedAt.UnixMilli(); got != want {
		t.Errorf("row %d computed_at %d, want %d", i, got, want)
	}
	if i == 0 && time.UnixMilli(row[1].Int64()).UTC().Format(rfc3339Milli) != baseUTC {
		t.Errorf("row 0 computed_at %v, want %s", time.UnixMilli(row[1].Int64()).UTC(), baseUTC)
	}
	c := 2
	if withScore {
		switch v := row[c]; {
		case in.Score == nil && !v.IsNull():
			t.Errorf("row %d score %v, want null", i, v)
		case in.Score != nil && (v.IsNull() || v.Double() != *in.Score):
			t.Errorf("row %d score %v, want %v", i, v, *in.Score)
		}
		c++
	}
	for _, k := range keys {
		want, ok := wantTraitText(t, in.Traits[k])
		v := row[c]
		switch {
		case !ok && !v.IsNull():
			t.Errorf("row %d trait %q = %q, want null", i, k, v.ByteArray())
		case ok && v.IsNull():
			t.Errorf("row %d trait %q is null, want %q", i, k, want)
		case ok && string(v.ByteArray()) != want:
			t.Errorf("row %d trait %q = %q, want %q", i, k, v.ByteArray(), want)
		}
		c++
	}
}

// TestParquetStreams checks that row groups reach the output while rows are still being
// written, rather than at Close.
func TestParquetStreams(t *testing.T) {
	var out bytes.Buffer
	w, err := NewWriter(&out, Parquet, Options{WithScore: true, TraitKeys: allTraitKeys})
	if err != nil {
		t.Fatal(err)
	}
	for i := range rowGroupRows {
		if err := w.Write(genRow(i)); err != nil {
			t.Fatal(err)
		}
	}
	if out.Len() > 64<<10 {
		t.Fatalf("%d bytes out before the first row group is full", out.Len())
	}
	for i := range 2 * batchRows {
		if err := w.Write(genRow(rowGroupRows + i)); err != nil {
			t.Fatal(err)
		}
	}
	if out.Len() < 100<<10 {
		t.Fatalf("only %d bytes out after the first row group filled", out.Len())
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// valueCases are trait values and how each format writes them.
var valueCases = []struct {
	name    string
	value   any
	text    string // parquet and CSV text; CSV unless csv is set
	null    bool   // parquet null, CSV empty
	csv     *string
	json    string // the trait in JSON Lines
	jsonVal any    // ...decoded: when set, compared instead of the raw text
}{
	{name: "string", value: "pro", text: "pro", json: `"pro"`},
	{name: "empty string is not null", value: "", text: "", json: `""`},
	{name: "integral float", value: 42.0, text: "42", json: `42`},
	{name: "fraction", value: 0.1, text: "0.1", json: `0.1`},
	{name: "negative number is not formula-quoted", value: -3.5, text: "-3.5", json: `-3.5`},
	{name: "large float", value: 1e21, text: "1e+21", json: `1e+21`},
	{name: "tiny float", value: 1e-7, text: "1e-7", json: `1e-7`},
	{name: "int", value: 7, text: "7", json: `7`},
	{name: "int64 beyond 2^53", value: int64(9007199254740993), text: "9007199254740993", json: `9007199254740993`},
	{name: "json.Number kept verbatim", value: json.Number("12.50"), text: "12.50", json: `12.50`},
	{name: "negative json.Number", value: json.Number("-1"), text: "-1", json: `-1`},
	{name: "bool", value: true, text: "true", json: `true`},
	{name: "nil", value: nil, null: true, json: `null`},
	{name: "NaN", value: math.NaN(), null: true, json: `null`},
	{name: "array", value: []any{"a", 1.0, nil}, text: `["a",1,null]`, json: `["a",1,null]`},
	{name: "object with sorted keys and no HTML escaping", value: map[string]any{"b": 1.0, "a": "<x&y>"},
		text: `{"a":"<x&y>","b":1}`, json: `{"a":"<x&y>","b":1}`},
	{name: "invalid UTF-8 replaced", value: "ok\xffgo\xc3", text: "ok\uFFFDgo\uFFFD", json: `"ok\ufffdgo\ufffd"`},
	{name: "invalid UTF-8 inside object", value: map[string]any{"k": "\xfe"}, text: `{"k":"\ufffd"}`,
		json: `{"k":"\ufffd"}`, jsonVal: map[string]any{"k": "\uFFFD"}},
	{name: "quotes, comma and newline", value: "say \"hi\",\nbye", text: "say \"hi\",\nbye", json: `"say \"hi\",\nbye"`},
	{name: "line separator", value: "a\u2028b", text: "a\u2028b", json: `"a\u2028b"`},
	{name: "control characters", value: "a\x00b\x1f", text: "a\x00b\x1f", json: `"a\u0000b\u001f"`},
	{name: "formula =", value: "=HYPERLINK(\"http://x\")", text: "=HYPERLINK(\"http://x\")",
		csv: new("'=HYPERLINK(\"http://x\")"), json: `"=HYPERLINK(\"http://x\")"`},
	{name: "formula +", value: "+1+1", text: "+1+1", csv: new("'+1+1"), json: `"+1+1"`},
	{name: "formula - in a string", value: "-2", text: "-2", csv: new("'-2"), json: `"-2"`},
	{name: "formula @", value: "@SUM(A1)", text: "@SUM(A1)", csv: new("'@SUM(A1)"), json: `"@SUM(A1)"`},
	{name: "formula tab", value: "\t=1", text: "\t=1", csv: new("'\t=1"), json: `"\t=1"`},
	{name: "formula CR", value: "\r=1", text: "\r=1", csv: new("'\r=1"), json: `"\r=1"`},
	{name: "formula char inside is fine", value: "a=b", text: "a=b", json: `"a=b"`},
}

func valueRow(v any) Row {
	return Row{UserID: "u1", ComputedAt: base, Traits: map[string]any{"t": v}}
}

func TestParquetValues(t *testing.T) {
	for _, tc := range valueCases {
		t.Run(tc.name, func(t *testing.T) {
			data := writeAll(t, Parquet, Options{TraitKeys: []string{"t"}}, func(int) Row { return valueRow(tc.value) }, 1)
			rows, err := readParquetMaps(data)
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if len(rows) != 1 {
				t.Fatalf("%d rows, want 1", len(rows))
			}
			got := rows[0]["t"]
			if tc.null {
				if got != nil {
					t.Fatalf("t = %#v, want null", got)
				}
				return
			}
			if got != tc.text {
				t.Fatalf("t = %#v, want %q", got, tc.text)
			}
		})
	}
}

// readParquetMaps reads every row as a map from column name to nil, string, int64 or float64.
func readParquetMaps(data []byte) ([]map[string]any, error) {
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, err
	}
	fields := f.Schema().Fields()
	r := parquet.NewReader(f)
	defer r.Close()
	var out []map[string]any
	buf := make([]parquet.Row, 100)
	for {
		n, err := r.ReadRows(buf)
		for _, row := range buf[:n] {
			m := map[string]any{}
			for _, v := range row {
				var x any
				switch {
				case v.IsNull():
				case v.Kind() == parquet.ByteArray:
					x = string(v.ByteArray())
				case v.Kind() == parquet.Int64:
					x = v.Int64()
				case v.Kind() == parquet.Double:
					x = v.Double()
				default:
					return nil, fmt.Errorf("unexpected value %v", v)
				}
				m[fields[v.Column()].Name()] = x
			}
			out = append(out, m)
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func TestParquetSpecialRows(t *testing.T) {
	nan, inf, zero := math.NaN(), math.Inf(1), 0.0
	tests := []struct {
		name      string
		row       Row
		wantID    string
		wantMilli int64
		wantScore any
	}{
		{"invalid UTF-8 user id", Row{UserID: "a\xffb", ComputedAt: base}, "a\uFFFDb", base.UnixMilli(), nil},
		{"NaN score is null", Row{UserID: "u", ComputedAt: base, Score: &nan}, "u", base.UnixMilli(), nil},
		{"infinite score is null", Row{UserID: "u", ComputedAt: base, Score: &inf}, "u", base.UnixMilli(), nil},
		{"zero score is not null", Row{UserID: "u", ComputedAt: base, Score: &zero}, "u", base.UnixMilli(), 0.0},
		{"time before 1970 floors", Row{UserID: "u", ComputedAt: time.Date(1969, 12, 31, 23, 59, 59, 999_999_999, time.UTC)}, "u", -1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := writeAll(t, Parquet, Options{WithScore: true}, func(int) Row { return tt.row }, 1)
			rows, err := readParquetMaps(data)
			if err != nil {
				t.Fatal(err)
			}
			got := rows[0]
			if got["user_id"] != tt.wantID {
				t.Errorf("user_id = %#v, want %q", got["user_id"], tt.wantID)
			}
			if got["computed_at"] != tt.wantMilli {
				t.Errorf("computed_at = %#v, want %d ms", got["computed_at"], tt.wantMilli)
			}
			if got["score"] != tt.wantScore {
				t.Errorf("score = %#v, want %#v", got["score"], tt.wantScore)
			}
		})
	}
}

func readCSV(t *testing.T, data []byte) [][]string {
	t.Helper()
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = 0 // every record as wide as the header
	recs, err := r.ReadAll()
	if err != nil {
		t.Fatalf("parse csv: %v\n%s", err, data)
	}
	return recs
}

func TestCSV(t *testing.T) {
	score := 97.25
	neg := -0.5
	whole := 100.0
	tests := []struct {
		name       string
		opts       Options
		rows       []Row
		wantHeader []string
		want       [][]string
	}{
		{
			name:       "user_id and computed_at in UTC with milliseconds",
			rows:       []Row{{UserID: "u1", ComputedAt: base}, {UserID: "u2", ComputedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}},
			wantHeader: []string{"user_id", "computed_at"},
			want:       [][]string{{"u1", baseUTC}, {"u2", "2026-01-02T03:04:05.000Z"}},
		},
		{
			name: "score: shortest decimal, empty when nil, negative not quoted",
			opts: Options{WithScore: true},
			rows: []Row{
				{UserID: "u1", ComputedAt: base, Score: &score},
				{UserID: "u2", ComputedAt: base},
				{UserID: "u3", ComputedAt: base, Score: &neg},
				{UserID: "u4", ComputedAt: base, Score: &whole},
			},
			wantHeader: []string{"user_id", "computed_at", "score"},
			want: [][]string{
				{"u1", baseUTC, "97.25"}, {"u2", baseUTC, ""}, {"u3", baseUTC, "-0.5"}, {"u4", baseUTC, "100"},
			},
		},
		{
			name: "traits in key order, missing and null empty, unrequested ignored",
			opts: Options{TraitKeys: []string{"plan", "age", "plan"}},
			rows: []Row{
				{UserID: "u1", ComputedAt: base, Traits: map[string]any{"age": 31.0, "plan": "pro", "other": "x"}},
				{UserID: "u2", ComputedAt: base, Traits: map[string]any{"plan": nil}},
				{UserID: "u3", ComputedAt: base},
			},
			wantHeader: []string{"user_id", "computed_at", "plan", "age"},
			want:       [][]string{{"u1", baseUTC, "pro", "31"}, {"u2", baseUTC, "", ""}, {"u3", baseUTC, "", ""}},
		},
		{
			name: "formula injection in user id and header",
			opts: Options{TraitKeys: []string{"=evil", "@x", "ok"}},
			rows: []Row{
				{UserID: "=1+1", ComputedAt: base, Traits: map[string]any{"=evil": "-1", "@x": -1.0, "ok": "fine"}},
				{UserID: "\xff=", ComputedAt: base},
			},
			wantHeader: []string{"user_id", "computed_at", "'=evil", "'@x", "ok"},
			want:       [][]string{{"'=1+1", baseUTC, "'-1", "-1", "fine"}, {"\uFFFD=", baseUTC, "", "", ""}},
		},
		{
			name:       "no rows: header only",
			opts:       Options{WithScore: true, TraitKeys: []string{"plan"}},
			wantHeader: []string{"user_id", "computed_at", "score", "plan"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := writeAll(t, CSV, tt.opts, func(i int) Row { return tt.rows[i] }, len(tt.rows))
			recs := readCSV(t, data)
			if len(recs) == 0 {
				t.Fatalf("no header in %q", data)
			}
			if fmt.Sprintf("%q", recs[0]) != fmt.Sprintf("%q", tt.wantHeader) {
				t.Fatalf("header %q, want %q", recs[0], tt.wantHeader)
			}
			if got, want := fmt.Sprintf("%q", recs[1:]), fmt.Sprintf("%q", tt.want); len(tt.want) > 0 && got != want {
				t.Fatalf("rows\n got %s\nwant %s", got, want)
			}
			if len(recs)-1 != len(tt.rows) {
				t.Fatalf("%d records, want %d", len(recs)-1, len(tt.rows))
			}
		})
	}
}

func TestCSVValues(t *testing.T) {
	for _, tc := range valueCases {
		t.Run(tc.name, func(t *testing.T) {
			data := writeAll(t, CSV, Options{TraitKeys: []string{"t"}}, func(int) Row { return valueRow(tc.value) }, 1)
			recs := readCSV(t, data)
			want := tc.text
			if tc.csv != nil {
				want = *tc.csv
			}
			if len(recs) != 2 || recs[1][2] != want {
				t.Fatalf("records %q, want trait %q", recs, want)
			}
		})
	}
}

func TestCSVManyRows(t *testing.T) {
	const n = 20_000
	keys := allTraitKeys
	data := writeAll(t, CSV, Options{WithScore: true, TraitKeys: keys}, genRow, n)
	recs := readCSV(t, data)
	if len(recs) != n+1 {
		t.Fatalf("%d records, want %d", len(recs), n+1)
	}
	for i, rec := range recs[1:] {
		in := genRow(i)
		wantScore := ""
		if in.Score != nil {
			wantScore = strconv.FormatFloat(*in.Score, 'f', -1, 64)
		}
		want := []string{in.UserID, in.ComputedAt.UTC().Format(rfc3339Milli), wantScore}
		for _, k := range keys {
			s, _ := wantTraitText(t, in.Traits[k])
			want = append(want, s)
		}
		if fmt.Sprintf("%q", rec) != fmt.Sprintf("%q", want) {
			t.Fatalf("record %d = %q, want %q", i, rec, want)
		}
	}
}

func readJSONL(t *testing.T, data []byte) []map[string]any {
	t.Helper()
	if len(data) > 0 && data[len(data)-1] != '\n' {
		t.Fatalf("output does not end in a newline: %q", data[max(0, len(data)-40):])
	}
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !json.Valid(line) {
			t.Fatalf("line %d is not valid JSON: %q", len(out)+1, line)
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("line %d: %v", len(out)+1, err)
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestJSONL(t *testing.T) {
	score := 97.25
	tests := []struct {
		name string
		opts Options
		rows []Row
		want []string // each line, compared as decoded JSON
	}{
		{
			name: "no score, no traits: keys absent",
			rows: []Row{{UserID: "u1", ComputedAt: base, Score: &score, Traits: map[string]any{"plan": "pro"}}},
			want: []string{`{"user_id":"u1","computed_at":"` + baseUTC + `"}`},
		},
		{
			name: "score null when nil",
			opts: Options{WithScore: true},
			rows: []Row{{UserID: "u1", ComputedAt: base, Score: &score}, {UserID: "u2", ComputedAt: base}},
			want: []string{
				`{"user_id":"u1","computed_at":"` + baseUTC + `","score":97.25}`,
				`{"user_id":"u2","computed_at":"` + baseUTC + `","score":null}`,
			},
		},
		{
			name: "traits keep types; missing omitted, null kept, unrequested dropped",
			opts: Options{TraitKeys: []string{"plan", "age", "vip", "tags", "addr", "gone", "none"}},
			rows: []Row{
				{UserID: "u1", ComputedAt: base, Traits: map[string]any{
					"plan": "pro", "age": 31.0, "vip": false, "tags": []any{"a", 2.0},
					"addr": map[string]any{"city": "Oslo"}, "none": nil, "extra": 1.0,
				}},
				{UserID: "u2", ComputedAt: base},
			},
			want: []string{
				`{"user_id":"u1","computed_at":"` + baseUTC + `","traits":{"plan":"pro","age":31,"vip":false,"tags":["a",2],"addr":{"city":"Oslo"},"none":null}}`,
				`{"user_id":"u2","computed_at":"` + baseUTC + `","traits":{}}`,
			},
		},
		{
			name: "invalid UTF-8 and escapes in user id",
			rows: []Row{{UserID: "a\xff\"\n<b>", ComputedAt: base}},
			want: []string{`{"user_id":"a\ufffd\"\n<b>","computed_at":"` + baseUTC + `"}`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := writeAll(t, JSONL, tt.opts, func(i int) Row { return tt.rows[i] }, len(tt.rows))
			got := readJSONL(t, data)
			if len(got) != len(tt.want) {
				t.Fatalf("%d lines, want %d:\n%s", len(got), len(tt.want), data)
			}
			for i, w := range tt.want {
				var want map[string]any
				if err := json.Unmarshal([]byte(w), &want); err != nil {
					t.Fatal(err)
				}
				if !jsonEqual(got[i], want) {
					t.Errorf("line %d\n got %s\nwant %s", i, mustJSON(got[i]), w)
				}
			}
		})
	}
}

func TestJSONLValues(t *testing.T) {
	for _, tc := range valueCases {
		t.Run(tc.name, func(t *testing.T) {
			data := writeAll(t, JSONL, Options{TraitKeys: []string{"t"}}, func(int) Row { return valueRow(tc.value) }, 1)
			want := `{"user_id":"u1","computed_at":"` + baseUTC + `","traits":{"t":` + tc.json + "}}\n"
			if tc.jsonVal == nil && string(data) != want {
				t.Fatalf("line\n got %q\nwant %q", data, want)
			}
			lines := readJSONL(t, data)
			if tc.jsonVal != nil && !jsonEqual(lines[0]["traits"].(map[string]any)["t"], tc.jsonVal) {
				t.Fatalf("trait %#v, want %#v", lines[0]["traits"], tc.jsonVal)
			}
		})
	}
}

func TestJSONLManyRows(t *testing.T) {
	const n = 20_000
	data := writeAll(t, JSONL, Options{WithScore: true, TraitKeys: allTraitKeys}, genRow, n)
	lines := readJSONL(t, data)
	if len(lines) != n {
		t.Fatalf("%d lines, want %d", len(lines), n)
	}
	for i, got := range lines {
		in := genRow(i)
		traits := map[string]any{}
		for _, k := range allTraitKeys {
			if v, ok := in.Traits[k]; ok {
				traits[k] = v
			}
		}
		want := map[string]any{
			"user_id":     in.UserID,
			"computed_at": in.ComputedAt.UTC().Format(rfc3339Milli),
			"score":       nil,
			"traits":      traits,
		}
		if in.Score != nil {
			want["score"] = *in.Score
		}
		if !jsonEqual(got, want) {
			t.Fatalf("line %d\n got %s\nwant %s", i, mustJSON(got), mustJSON(want))
		}
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// jsonEqual compares two values by their canonical JSON, so float64 and decoded numbers agree.
func jsonEqual(a, b any) bool { return mustJSON(a) == mustJSON(b) }

func TestUnencodableTraitRejectsRowOnly(t *testing.T) {
	for _, f := range []Format{Parquet, CSV, JSONL} {
		t.Run(string(f), func(t *testing.T) {
			var out bytes.Buffer
			w, err := NewWriter(&out, f, Options{TraitKeys: []string{"a", "bad"}})
			if err != nil {
				t.Fatal(err)
			}
			good := Row{UserID: "u1", ComputedAt: base, Traits: map[string]any{"a": "x"}}
			bad := Row{UserID: "u2", ComputedAt: base, Traits: map[string]any{"a": "y", "bad": make(chan int)}}
			if err := w.Write(good); err != nil {
				t.Fatal(err)
			}
			err = w.Write(bad)
			if err == nil || !strings.Contains(err.Error(), `trait "bad"`) || !strings.Contains(err.Error(), `"u2"`) {
				t.Fatalf("Write(bad) = %v, want an error naming the user and trait", err)
			}
			if err := w.Write(good); err != nil {
				t.Fatalf("Write after a rejected row: %v", err)
			}
			if w.Rows() != 2 {
				t.Fatalf("Rows() = %d, want 2", w.Rows())
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			var ids []string
			switch f {
			case Parquet:
				rows, err := readParquetMaps(out.Bytes())
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range rows {
					ids = append(ids, r["user_id"].(string))
				}
			case CSV:
				for _, rec := range readCSV(t, out.Bytes())[1:] {
					ids = append(ids, rec[0])
				}
			case JSONL:
				for _, m := range readJSONL(t, out.Bytes()) {
					ids = append(ids, m["user_id"].(string))
				}
			}
			if fmt.Sprint(ids) != "[u1 u1]" {
				t.Fatalf("user ids in the file %v, want [u1 u1]", ids)
			}
		})
	}
}

// failAfter accepts n bytes, then fails.
type failAfter struct{ n int }

var errDisk = errors.New("disk full")

func (f *failAfter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		k := f.n
		f.n = 0
		return k, errDisk
	}
	f.n -= len(p)
	return len(p), nil
}

func TestOutputErrorIsSticky(t *testing.T) {
	for _, f := range []Format{Parquet, CSV, JSONL} {
		t.Run(string(f), func(t *testing.T) {
			w, err := NewWriter(&failAfter{n: 1000}, f, Options{WithScore: true, TraitKeys: allTraitKeys})
			if err != nil {
				t.Fatal(err)
			}
			var werr error
			for i := 0; i < 2*rowGroupRows && werr == nil; i++ {
				werr = w.Write(genRow(i))
			}
			if werr != nil && !errors.Is(werr, errDisk) {
				t.Fatalf("Write error %v, want it to wrap %v", werr, errDisk)
			}
			cerr := w.Close()
			if !errors.Is(cerr, errDisk) {
				t.Fatalf("Close = %v, want it to wrap %v", cerr, errDisk)
			}
			if err := w.Write(genRow(0)); err == nil {
				t.Fatal("Write after a failed Close succeeded")
			}
		})
	}
}

func TestParseFormat(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Format
		ok   bool
	}{
		{"parquet", "parquet", Parquet, true},
		{"csv", "csv", CSV, true},
		{"jsonl", "jsonl", JSONL, true},
		{"upper case", "CSV", CSV, true},
		{"mixed case with spaces", "  Parquet\t", Parquet, true},
		{"jsonl newline", "JSONL\n", JSONL, true},
		{"empty", "", "", false},
		{"blank", "   ", "", false},
		{"json is not jsonl", "json", "", false},
		{"ndjson", "ndjson", "", false},
		{"extension with dot", ".csv", "", false},
		{"inner space", "par quet", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseFormat(tt.in)
			if tt.ok {
				if err != nil || got != tt.want {
					t.Fatalf("ParseFormat(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("ParseFormat(%q) = %q, want an error", tt.in, got)
			}
			if !strings.Contains(err.Error(), "must be one of parquet, csv, jsonl") {
				t.Errorf("error %q does not list the formats", err)
			}
			if !errors.Is(err, errs.ErrInvalid) {
				t.Errorf("error %v is not errs.ErrInvalid", err)
			}
		})
	}
}

func TestFormatProperties(t *testing.T) {
	tests := []struct {
		f           Format
		contentType string
		ext         string
	}{
		{Parquet, "application/vnd.apache.parquet", ".parquet"},
		{CSV, "text/csv; charset=utf-8", ".csv"},
		{JSONL, "application/x-ndjson", ".jsonl"},
	}
	for _, tt := range tests {
		t.Run(string(tt.f), func(t *testing.T) {
			if got := tt.f.ContentType(); got != tt.contentType {
				t.Errorf("ContentType() = %q, want %q", got, tt.contentType)
			}
			if got := tt.f.Ext(); got != tt.ext {
				t.Errorf("Ext() = %q, want %q", got, tt.ext)
			}
		})
	}
}

func TestNewWriterErrors(t *testing.T) {
	tests := []struct {
		name    string
		w       io.Writer
		f       Format
		opts    Options
		wantMsg string
		invalid bool // matches errs.ErrInvalid
	}{
		{"empty key", io.Discard, CSV, Options{TraitKeys: []string{"plan", ""}}, "trait_keys[1]: is empty", true},
		{"blank key", io.Discard, Parquet, Options{TraitKeys: []string{" "}}, "trait_keys[0]: is empty", true},
		{"user_id", io.Discard, Parquet, Options{TraitKeys: []string{"user_id"}}, `"user_id" is the name of a fixed column`, true},
		{"computed_at", io.Discard, JSONL, Options{TraitKeys: []string{"computed_at"}}, `"computed_at" is the name of a fixed column`, true},
		{"score with score", io.Discard, CSV, Options{WithScore: true, TraitKeys: []string{"score"}}, `"score" is the name of a fixed column`, true},
		{"score without score", io.Discard, CSV, Options{TraitKeys: []string{"score"}}, `"score" is the name of a fixed column`, true},
		{"invalid UTF-8 key", io.Discard, Parquet, Options{TraitKeys: []string{"pl\xffan"}}, "trait_keys[0]: is not valid UTF-8", true},
		{"several bad keys reported together", io.Discard, Parquet, Options{TraitKeys: []string{"", "ok", "user_id"}}, "trait_keys[2]", true},
		{"unknown format", io.Discard, Format("xml"), Options{}, "must be one of parquet, csv, jsonl", true},
		{"zero format", io.Discard, "", Options{}, "must be one of parquet, csv, jsonl", true},
		{"nil writer", nil, CSV, Options{}, "nil io.Writer", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := NewWriter(tt.w, tt.f, tt.opts)
			if err == nil {
				t.Fatalf("NewWriter succeeded (%T), want an error", w)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error %q does not contain %q", err, tt.wantMsg)
			}
			if errors.Is(err, errs.ErrInvalid) != tt.invalid {
				t.Errorf("errors.Is(%v, ErrInvalid) = %v, want %v", err, !tt.invalid, tt.invalid)
			}
		})
	}
}

func TestNewWriterAcceptsOddKeys(t *testing.T) {
	keys := []string{"Score", "user id", "a,b", "a.b", "ключ", `q"uote`}
	for _, f := range []Format{Parquet, CSV, JSONL} {
		t.Run(string(f), func(t *testing.T) {
			traits := map[string]any{}
			for i, k := range keys {
				traits[k] = float64(i)
			}
			data := writeAll(t, f, Options{TraitKeys: keys}, func(int) Row {
				return Row{UserID: "u", ComputedAt: base, Traits: traits}
			}, 1)
			switch f {
			case Parquet:
				pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
				if err != nil {
					t.Fatal(err)
				}
				for i, k := range keys {
					if got := pf.Schema().Fields()[2+i].Name(); got != k {
						t.Errorf("column %d = %q, want %q", 2+i, got, k)
					}
				}
			case CSV:
				recs := readCSV(t, data)
				if got, want := fmt.Sprintf("%q", recs[0][2:]), fmt.Sprintf("%q", keys); got != want {
					t.Errorf("header %s, want %s", got, want)
				}
			case JSONL:
				lines := readJSONL(t, data)
				if !jsonEqual(lines[0]["traits"], traits) {
					t.Errorf("traits %v, want %v", lines[0]["traits"], traits)
				}
			}
		})
	}
}

// countingWriter is io.Discard that counts the bytes, for the file size per row.
type countingWriter struct{ n int64 }

func (c *countingWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// BenchmarkParquet1M writes one million members with a score and four traits.
func BenchmarkParquet1M(b *testing.B) {
	const rows = 1_000_000
	pool := make([]Row, 4096)
	for i := range pool {
		pool[i] = genRow(i)
	}
	userIDs := make([]string, rows)
	for i := range userIDs {
		userIDs[i] = fmt.Sprintf("%08x-user-%d", uint32(i*2654435761), i)
	}
	opts := Options{WithScore: true, TraitKeys: []string{"plan", "age", "vip", "tags"}}
	b.ReportAllocs()
	var files int
	var out countingWriter
	for b.Loop() {
		out = countingWriter{}
		w, err := NewWriter(&out, Parquet, opts)
		if err != nil {
			b.Fatal(err)
		}
		for i := range rows {
			r := pool[i%len(pool)]
			r.UserID = userIDs[i]
			r.ComputedAt = base.Add(time.Duration(i) * time.Millisecond)
			if err := w.Write(r); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		files++
	}
	b.ReportMetric(float64(files*rows)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64(out.n)/rows, "file-B/row")
}
