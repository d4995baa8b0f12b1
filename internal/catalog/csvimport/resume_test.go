package csvimport

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// step is one Next call as the import sees it.
type step struct {
	Row  int
	Cell map[string]string
	Err  string
	Line int
	At   int64 // BytesRead after the call
}

func drain(t *testing.T, r *Reader, limit int) []step {
	t.Helper()
	var out []step
	for limit < 0 || len(out) < limit {
		row, n, err := r.Next()
		if err == io.EOF {
			break
		}
		s := step{Row: n, Cell: row, At: r.BytesRead()}
		var re *RowError
		switch {
		case errors.As(err, &re):
			s.Err, s.Line = re.Error(), re.Line
		case err != nil:
			t.Fatalf("fatal error after row %d: %v", n, err)
		}
		out = append(out, s)
	}
	return out
}

// TestResumeContinuesEveryPosition stops a reader after every row of real files and resumes from
// its Position on the bytes after it: the rest of the stream (rows, row and line numbers, errors,
// offsets) is what the uninterrupted reader gave.
func TestResumeContinuesEveryPosition(t *testing.T) {
	files := map[string]string{
		"shopify_products.csv":   ",",
		"european_semicolon.csv": ";",
		"bom.csv":                ",",
		"broken.csv":             ",",
		"tabs.tsv":               "\t",
	}
	for name, delim := range files {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			full, err := NewReader(bytes.NewReader(data), delim)
			if err != nil {
				t.Fatal(err)
			}
			want := drain(t, full, -1)
			if len(want) < 3 {
				t.Fatalf("only %d rows in %s", len(want), name)
			}
			for k := 0; k <= len(want); k++ {
				r, err := NewReader(bytes.NewReader(data), delim)
				if err != nil {
					t.Fatal(err)
				}
				head := drain(t, r, k)
				p := r.Position()
				if k > 0 && p.Offset != head[k-1].At {
					t.Fatalf("k=%d: Position().Offset = %d, BytesRead was %d", k, p.Offset, head[k-1].At)
				}
				rest, err := Resume(bytes.NewReader(data[p.Offset:]), delim, r.Headers(), p)
				if err != nil {
					t.Fatal(err)
				}
				got := append(head, drain(t, rest, -1)...)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("resumed after %d rows at %+v:\n got %s\nwant %s", k, p, show(got), show(want))
				}
			}
		})
	}
}

func show(ss []step) string {
	var b bytes.Buffer
	for _, s := range ss {
		fmt.Fprintf(&b, "\n  row %d line %d at %d err %q cells %d", s.Row, s.Line, s.At, s.Err, len(s.Cell))
	}
	return b.String()
}

func TestResumeRejectsBadPositions(t *testing.T) {
	for _, p := range []Position{{Offset: -1, Row: 2, Line: 2}, {Offset: 10, Row: 0, Line: 1}, {Offset: 10, Row: 2, Line: 0}} {
		if _, err := Resume(bytes.NewReader(nil), ",", []string{"a"}, p); err == nil {
			t.Errorf("Resume at %+v: no error", p)
		}
	}
	if _, err := Resume(bytes.NewReader(nil), ",", nil, Position{Offset: 1, Row: 1, Line: 1}); err == nil {
		t.Error("Resume without headers: no error")
	}
}
