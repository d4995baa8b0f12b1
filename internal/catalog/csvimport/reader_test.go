package csvimport

import (
	"encoding/csv"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

// result is one Next call: the row's SKU or the sentinel its error wraps.
type result struct {
	row  int
	line int // for errors
	sku  string
	err  error // csv.ErrQuote, csv.ErrBareQuote, ErrFieldCount, ErrNotUTF8
}

func readAll(t *testing.T, r *Reader, skuHeader string) []result {
	t.Helper()
	var out []result
	last := int64(0)
	for {
		row, n, err := r.Next()
		if err == io.EOF {
			return out
		}
		if b := r.BytesRead(); b < last {
			t.Errorf("BytesRead went back from %d to %d", last, b)
		} else {
			last = b
		}
		var re *RowError
		switch {
		case errors.As(err, &re):
			if re.Row != n || row != nil {
				t.Errorf("row %d: RowError.Row %d, row %v", n, re.Row, row)
			}
			var sentinel error
			for _, s := range []error{csv.ErrQuote, csv.ErrBareQuote, ErrFieldCount, ErrNotUTF8} {
				if errors.Is(err, s) {
					sentinel = s
				}
			}
			if sentinel == nil {
				t.Errorf("row %d: unexpected error %v", n, err)
			}
			out = append(out, result{row: n, line: re.Line, err: sentinel})
		case err != nil:
			t.Fatalf("fatal error after %v: %v", out, err)
		default:
			out = append(out, result{row: n, sku: row[skuHeader]})
		}
	}
}

func openReader(t *testing.T, file, delimiter string) *Reader {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	r, err := NewReader(f, delimiter)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestReaderBroken(t *testing.T) {
	r := openReader(t, "broken.csv", ",")
	if got := r.Headers(); !reflect.DeepEqual(got, []string{"sku", "name", "price", "qty"}) {
		t.Fatalf("headers %q", got)
	}
	want := []result{
		{row: 2, sku: "SKU-1"},
		{row: 3, sku: "SKU-2"}, // lines 3-4
		{row: 4, line: 5, err: csv.ErrQuote},
		{row: 5, sku: "SKU-4"},
		{row: 6, line: 7, err: ErrFieldCount}, // too few
		{row: 7, line: 8, err: ErrFieldCount}, // too many
		{row: 8, line: 9, err: csv.ErrBareQuote},
		{row: 9, sku: "SKU-8"},
		// row 10 is a blank line, row 12 ",,,"
		{row: 11, sku: "SKU-9"},
		{row: 13, line: 14, err: csv.ErrQuote}, // never closed: swallows the last line
	}
	if got := readAll(t, r, "sku"); !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	// EOF again
	if _, _, err := r.Next(); err != io.EOF {
		t.Errorf("after the end: %v", err)
	}
}

func TestReaderRowErrorMessages(t *testing.T) {
	r, err := NewReader(strings.NewReader("sku,name\nA,B,C\nD,\"x\"y\n"), ",")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"row 2: wrong number of fields on line 2: 3 instead of 2",
		`row 3: parse error on line 3, column 5: extraneous or missing " in quoted-field`,
	} {
		_, _, err := r.Next()
		if err == nil || err.Error() != want {
			t.Errorf("error %v, want %s", err, want)
		}
	}
}

func TestReaderBOMCRLF(t *testing.T) {
	r := openReader(t, "bom.csv", ",")
	if h := r.Headers(); h[0] != "SKU" || len(h) != 6 {
		t.Fatalf("headers %q", h)
	}
	var notes []string
	var rows []int
	for {
		row, n, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		notes = append(notes, row["Notes"])
		rows = append(rows, n)
	}
	if want := []string{"", "Sold in pairs,\nsaucer included", "", "Stainless steel"}; !reflect.DeepEqual(notes, want) {
		t.Errorf("notes %q, want %q", notes, want)
	}
	if want := []int{2, 3, 4, 5}; !reflect.DeepEqual(rows, want) {
		t.Errorf("rows %v, want %v", rows, want)
	}
	st, _ := os.Stat(filepath.Join("testdata", "bom.csv"))
	if r.BytesRead() != st.Size() {
		t.Errorf("BytesRead %d, file %d", r.BytesRead(), st.Size())
	}
}

func TestReaderRowNumbers(t *testing.T) {
	tests := []struct {
		name, csv, delimiter string
		want                 []result
	}{
		{
			name: "plain", csv: "sku,name\nA,1\nB,2\n", delimiter: ",",
			want: []result{{row: 2, sku: "A"}, {row: 3, sku: "B"}},
		},
		{
			name: "no final line break", csv: "sku,name\nA,1\nB,2", delimiter: ",",
			want: []result{{row: 2, sku: "A"}, {row: 3, sku: "B"}},
		},
		{
			name: "quoted line breaks are one row", csv: "sku,name\nA,\"1\n2\n3\"\nB,2\n\"C\n\",3\n", delimiter: ",",
			want: []result{{row: 2, sku: "A"}, {row: 3, sku: "B"}, {row: 4, sku: "C\n"}},
		},
		{
			name: "blank lines count as rows", csv: "sku,name\n\nA,1\n\n\nB,2\n", delimiter: ",",
			want: []result{{row: 3, sku: "A"}, {row: 6, sku: "B"}},
		},
		{
			name: "empty rows are skipped", csv: "sku;name\nA;1\n;\n  \nB;2\n", delimiter: ";",
			want: []result{{row: 2, sku: "A"}, {row: 5, sku: "B"}},
		},
		{
			name: "CRLF and a blank line after a multi-line cell", csv: "sku\tname\r\nA\t\"x\r\ny\"\r\n\r\nB\t2\r\n", delimiter: "\t",
			want: []result{{row: 2, sku: "A"}, {row: 4, sku: "B"}},
		},
		{
			name: "a broken multi-line row", csv: "sku,name\n\"A\nx\"y,1\nB,2\n", delimiter: ",",
			want: []result{{row: 2, line: 2, err: csv.ErrQuote}, {row: 3, sku: "B"}},
		},
		{
			name: "not UTF-8", csv: "sku,name\nA,Gr\xf6\xdfe\nB,2\n", delimiter: ",",
			want: []result{{row: 2, line: 2, err: ErrNotUTF8}, {row: 3, sku: "B"}},
		},
		{
			name: "header only", csv: "sku,name\n", delimiter: ",",
			want: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := NewReader(strings.NewReader(tt.csv), tt.delimiter)
			if err != nil {
				t.Fatal(err)
			}
			if got := readAll(t, r, "sku"); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
			if r.BytesRead() != int64(len(tt.csv)) {
				t.Errorf("BytesRead %d, want %d", r.BytesRead(), len(tt.csv))
			}
		})
	}
}

func TestReaderHeaders(t *testing.T) {
	r, err := NewReader(strings.NewReader("\xEF\xBB\xBF SKU ,Name,,Name,\n1,2,3,4,5\n"), ",")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"SKU", "Name", "Column 3", "Name (2)", "Column 5"}
	if got := r.Headers(); !reflect.DeepEqual(got, want) {
		t.Errorf("headers %q, want %q", got, want)
	}
	row, n, err := r.Next()
	if err != nil || n != 2 || row["Name (2)"] != "4" || row["Column 5"] != "5" {
		t.Errorf("row %v %d %v", row, n, err)
	}
}

func TestNewReaderErrors(t *testing.T) {
	tests := []struct {
		name, data, delimiter string
		bad                   bool
	}{
		{"empty", "", ",", true},
		{"blank lines only", "\n\n", ",", true},
		{"byte-order mark only", "\xEF\xBB\xBF", ",", true},
		{"UTF-16", "\xFF\xFEs\x00", ",", true},
		{"broken header", "\"sku,name\n", ",", true},
		{"empty header row", ",,\n1,2,3\n", ",", true},
		{"header not UTF-8", "Gr\xf6\xdfe\n", ",", true},
		{"bad delimiter", "a,b\n", "\"", false},
		{"two-character delimiter", "a,b\n", ";;", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewReader(strings.NewReader(tt.data), tt.delimiter)
			if err == nil || errors.Is(err, ErrBadCSV) != tt.bad {
				t.Errorf("error %v, want ErrBadCSV %v", err, tt.bad)
			}
		})
	}
	if _, err := NewReader(iotest.ErrReader(errors.New("boom")), ","); err == nil || errors.Is(err, ErrBadCSV) {
		t.Errorf("read error: %v", err)
	}
}

// TestReaderFatal: an error reading the input and a row that never ends stop the stream.
func TestReaderFatal(t *testing.T) {
	t.Run("read error", func(t *testing.T) {
		in := io.MultiReader(strings.NewReader("sku,name\nA,1\n"), iotest.ErrReader(errors.New("connection reset")))
		r, err := NewReader(in, ",")
		if err != nil {
			t.Fatal(err)
		}
		if _, n, err := r.Next(); err != nil || n != 2 {
			t.Fatalf("first row: %d %v", n, err)
		}
		for range 2 {
			_, _, err := r.Next()
			var re *RowError
			if err == nil || err == io.EOF || errors.As(err, &re) || !strings.Contains(err.Error(), "connection reset") {
				t.Errorf("error %v", err)
			}
		}
	})
	t.Run("row too large within one buffer", func(t *testing.T) {
		// limit 4096: rows that fit the reader's buffer whole are checked too.
		for _, tt := range []struct {
			name, row string
			tooLarge  bool
		}{
			{"closed quote", "B,\"" + strings.Repeat("x", 5000) + "\"\n", true},
			{"quote never closed, to the end of the file", "B,\"never closed" + strings.Repeat("x", 5000) + "\nC,3\n", true},
			{"at the limit", "B," + strings.Repeat("x", 4096-3) + "\n", false},
		} {
			t.Run(tt.name, func(t *testing.T) {
				r, err := NewReader(strings.NewReader("sku,name\nA,1\n"+tt.row+"D,4\n"), ",")
				if err != nil {
					t.Fatal(err)
				}
				r.src.limit = 4096
				if _, n, err := r.Next(); err != nil || n != 2 {
					t.Fatalf("first row: %d %v", n, err)
				}
				_, n, err := r.Next()
				if !tt.tooLarge {
					if err != nil || n != 3 {
						t.Fatalf("row at the limit: %d %v", n, err)
					}
					return
				}
				if !errors.Is(err, ErrRowTooLarge) || !strings.Contains(err.Error(), "row 3") {
					t.Fatalf("error %v, want row 3 too large", err)
				}
				if _, _, err := r.Next(); !errors.Is(err, ErrRowTooLarge) {
					t.Fatalf("error after %v, want it again", err)
				}
			})
		}
	})
	t.Run("row too large", func(t *testing.T) {
		data := "sku,name\nA,1\nB,\"never closed\n" + strings.Repeat("more text\n", 10000)
		r, err := NewReader(strings.NewReader(data), ",")
		if err != nil {
			t.Fatal(err)
		}
		r.src.limit = 4096
		if _, n, err := r.Next(); err != nil || n != 2 {
			t.Fatalf("first row: %d %v", n, err)
		}
		for range 2 {
			if _, _, err := r.Next(); !errors.Is(err, ErrRowTooLarge) || !strings.Contains(err.Error(), "row 3") {
				t.Errorf("error %v", err)
			}
		}
	})
}
