package csvimport

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Errors of one row, wrapped in a *RowError (a broken quote is a *csv.ParseError wrapping
// csv.ErrQuote or csv.ErrBareQuote).
var (
	ErrFieldCount = errors.New("wrong number of fields")
	ErrNotUTF8    = errors.New("not valid UTF-8")
)

// ErrRowTooLarge stops the stream: a row longer than MaxRowBytes, nearly always a quote that is
// never closed and swallows the rest of the file.
var ErrRowTooLarge = errors.New("row too large")

// MaxRowBytes bounds the memory one row may take.
const MaxRowBytes = 16 << 20

// MaxColumns bounds the columns of a file (Akeneo exports of many locales and channels have a
// few hundred).
const MaxColumns = 4096

var (
	bomUTF8    = []byte{0xEF, 0xBB, 0xBF}
	bomUTF16LE = []byte{0xFF, 0xFE}
	bomUTF16BE = []byte{0xFE, 0xFF}
)

// RowError is a row that cannot be imported: the stream goes on after it.
type RowError struct {
	Row  int   // row number as a spreadsheet shows it (header = 1)
	Line int   // line of the file where the row starts
	Err  error // ErrFieldCount, ErrNotUTF8 or a *csv.ParseError
}

func (e *RowError) Error() string { return "row " + strconv.Itoa(e.Row) + ": " + e.Err.Error() }
func (e *RowError) Unwrap() error { return e.Err }

// Reader streams the data rows of a CSV file for the import.
//
// Row numbers are those a spreadsheet shows: the header is row 1 and every record after it is one
// row, however many lines its quoted cells span; blank lines count as (skipped) rows, as a
// spreadsheet shows them. Rows whose cells are all empty are skipped.
type Reader struct {
	src        *guardReader
	buf        *bufio.Reader // between src and cr
	cr         *csv.Reader
	base       int64 // bytes of the file before cr's input: the byte-order mark, or a resume offset
	lineBase   int   // lines of the file before cr's input (resumed readers)
	headers    []string
	rawHeaders []string // trimmed, before empty and repeated headers are named
	row        int      // number of the last row read (the header is 1)
	line       int      // last line of the file consumed by it
	err        error    // sticky: io.EOF or a fatal error
}

// NewReader strips a UTF-8 byte-order mark from r, reads the header row and returns a Reader for
// the data rows. delimiter is a single character ("," ";" "\t"); "" means ",". A file that is empty,
// UTF-16, whose header row cannot be parsed or has more than MaxColumns columns gives an error
// wrapping ErrBadCSV.
//
// Headers are trimmed; an empty header becomes "Column N" (N counting from 1) and a repeated one
// gets " (2)", " (3)"... so that every header is a distinct key of the rows.
func NewReader(r io.Reader, delimiter string) (*Reader, error) {
	comma, err := parseDelimiter(delimiter)
	if err != nil {
		return nil, err
	}
	src := &guardReader{r: r, limit: MaxRowBytes}
	br := bufio.NewReaderSize(src, 64<<10)
	rd := &Reader{src: src, buf: br}
	head, _ := br.Peek(3)
	switch {
	case bytes.HasPrefix(head, bomUTF8):
		_, _ = br.Discard(3)
		rd.base = 3
	case bytes.HasPrefix(head, bomUTF16LE) || bytes.HasPrefix(head, bomUTF16BE):
		return nil, badCSV("the file is UTF-16; save it as \"CSV UTF-8\"")
	}
	rd.cr = csv.NewReader(br)
	rd.cr.Comma = comma
	rd.cr.FieldsPerRecord = -1

	rec, err := rd.cr.Read()
	var pe *csv.ParseError
	switch {
	case err == io.EOF:
		return nil, badCSV("the file is empty")
	case errors.As(err, &pe):
		return nil, fmt.Errorf("%w: header row: %w", ErrBadCSV, err)
	case errors.Is(err, ErrRowTooLarge):
		return nil, badCSV("the header row is longer than %d MiB", MaxRowBytes>>20)
	case err != nil:
		return nil, err
	}
	for _, c := range rec {
		if !utf8.ValidString(c) {
			return nil, badCSV("the header row is not UTF-8; save the file as \"CSV UTF-8\"")
		}
	}
	if isBlankRecord(rec) {
		return nil, badCSV("no header row: the first row is empty")
	}
	if len(rec) > MaxColumns {
		return nil, badCSV("the header row has %d columns, more than %d", len(rec), MaxColumns)
	}
	rd.headers = uniqueHeaders(rec)
	rd.rawHeaders = make([]string, len(rec))
	for i, h := range rec {
		rd.rawHeaders[i] = strings.TrimSpace(h)
	}
	rd.row = 1
	rd.line = recordEndLine(rd.cr, rec)
	return rd, nil
}

func parseDelimiter(d string) (rune, error) {
	if d == "" {
		return ',', nil
	}
	r, n := utf8.DecodeRuneInString(d)
	if n != len(d) || r == '"' || r == '\r' || r == '\n' || r == utf8.RuneError || unicode.IsControl(r) && r != '\t' {
		return 0, fmt.Errorf("csvimport: invalid delimiter %q", d)
	}
	return r, nil
}

// uniqueHeaders trims the headers and makes them distinct keys.
func uniqueHeaders(rec []string) []string {
	out := make([]string, len(rec))
	seen := make(map[string]bool, len(rec))
	next := map[string]int{} // next suffix to try for a repeated header
	for i, h := range rec {
		h = strings.TrimFunc(h, func(r rune) bool { return unicode.IsSpace(r) || r == '\uFEFF' })
		if h == "" {
			h = "Column " + strconv.Itoa(i+1)
		}
		if seen[h] {
			base, n := h, max(2, next[h])
			for h = base + " (" + strconv.Itoa(n) + ")"; seen[h]; h = base + " (" + strconv.Itoa(n) + ")" {
				n++
			}
			next[base] = n + 1
		}
		seen[h] = true
		out[i] = h
	}
	return out
}

// Headers returns the header row (see NewReader).
func (r *Reader) Headers() []string { return slices.Clone(r.headers) }

// BytesRead is how many bytes of the file the rows read so far take, byte-order mark included.
func (r *Reader) BytesRead() int64 { return r.base + r.cr.InputOffset() }

// Position is where a Reader stands: after its header row or after the last row Next returned.
// Resume continues from it, so a long import can be checkpointed and picked up by another process.
type Position struct {
	Offset int64 `json:"offset"` // bytes of the file consumed, byte-order mark included
	Row    int   `json:"row"`    // number of the last row read (the header is 1)
	Line   int   `json:"line"`   // last line of the file consumed
}

// Position returns the reader's position.
func (r *Reader) Position() Position {
	return Position{Offset: r.BytesRead(), Row: r.row, Line: r.line}
}

// Resume returns a Reader that goes on from p, a Position of an earlier Reader of the same file:
// rest yields the file from p.Offset on, headers are that Reader's Headers and delimiter its
// delimiter. Row and line numbers, and BytesRead, continue those of the file.
func Resume(rest io.Reader, delimiter string, headers []string, p Position) (*Reader, error) {
	comma, err := parseDelimiter(delimiter)
	if err != nil {
		return nil, err
	}
	if len(headers) == 0 || p.Offset < 0 || p.Row < 1 || p.Line < 1 {
		return nil, fmt.Errorf("csvimport: cannot resume at %+v with %d headers", p, len(headers))
	}
	src := &guardReader{r: rest, limit: MaxRowBytes}
	rd := &Reader{src: src, base: p.Offset, lineBase: p.Line, headers: slices.Clone(headers), row: p.Row, line: p.Line}
	rd.rawHeaders = slices.Clone(headers)
	rd.buf = bufio.NewReaderSize(src, 64<<10)
	rd.cr = csv.NewReader(rd.buf)
	rd.cr.Comma = comma
	rd.cr.FieldsPerRecord = -1
	return rd, nil
}

// Next returns the next data row as header -> cell (cells as in the file, not trimmed) and its
// row number. A row that cannot be imported (a broken quote, more or fewer cells than the header,
// bytes that are not UTF-8) comes back as a nil row, its number and a *RowError: count it and
// call Next again. At the end Next returns io.EOF; any other error (reading the input,
// ErrRowTooLarge) is fatal and returned again by every later call.
func (r *Reader) Next() (row map[string]string, rowNum int, err error) {
	rec, n, err := r.next()
	if err != nil {
		return nil, n, err
	}
	row = make(map[string]string, len(r.headers))
	for i, h := range r.headers {
		row[h] = rec[i]
	}
	return row, n, nil
}

// next is Next returning the cells in header order.
func (r *Reader) next() ([]string, int, error) {
	for {
		if r.err != nil {
			return nil, 0, r.err
		}
		// The row starts where cr stands: what src has read minus what is buffered ahead.
		r.src.mark = r.src.n - int64(r.buf.Buffered())
		from := r.cr.InputOffset()
		rec, err := r.cr.Read()
		if err != io.EOF && r.src.limit > 0 && r.cr.InputOffset()-from > r.src.limit {
			// Read to its end within the last buffer (the guard only stops a row that needs
			// more), or a quote that ran to the end of the file: too long either way.
			err = ErrRowTooLarge
		}
		if err == io.EOF {
			r.err = io.EOF
			return nil, 0, io.EOF
		}
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			if r.lineBase > 0 { // the lines the error names are the file's
				shifted := *pe
				shifted.StartLine += r.lineBase
				shifted.Line += r.lineBase
				pe, err = &shifted, &shifted
			}
			n := r.advance(pe.StartLine, pe.Line)
			return nil, n, &RowError{Row: n, Line: pe.StartLine, Err: err}
		}
		if err != nil {
			if errors.Is(err, ErrRowTooLarge) {
				err = fmt.Errorf("%w: row %d is longer than %d MiB (a quote that is never closed?)", ErrRowTooLarge, r.row+1, MaxRowBytes>>20)
			}
			r.err = fmt.Errorf("csvimport: after row %d: %w", r.row, err)
			return nil, 0, r.err
		}
		start, _ := r.cr.FieldPos(0)
		start += r.lineBase
		n := r.advance(start, recordEndLine(r.cr, rec)+r.lineBase)
		if isBlankRecord(rec) {
			continue
		}
		if len(rec) != len(r.headers) {
			return nil, n, &RowError{Row: n, Line: start, Err: fmt.Errorf("%w on line %d: %d instead of %d", ErrFieldCount, start, len(rec), len(r.headers))}
		}
		for _, c := range rec {
			if !utf8.ValidString(c) {
				return nil, n, &RowError{Row: n, Line: start, Err: fmt.Errorf("%w on line %d", ErrNotUTF8, start)}
			}
		}
		return rec, n, nil
	}
}

// advance numbers the record spanning lines start..end: the next row, plus one row for every
// blank line the csv reader skipped before it.
func (r *Reader) advance(start, end int) int {
	r.row += 1 + max(0, start-r.line-1)
	r.line = max(end, start)
	return r.row
}

// recordEndLine is the last line of the record the csv reader just returned: the line its last
// field starts on plus the line breaks inside that (quoted) field.
func recordEndLine(cr *csv.Reader, rec []string) int {
	line, _ := cr.FieldPos(len(rec) - 1)
	return line + strings.Count(rec[len(rec)-1], "\n")
}

// isBlankRecord reports a record without content: ",,," or a line of spaces.
func isBlankRecord(rec []string) bool {
	for _, c := range rec {
		if strings.TrimSpace(c) != "" {
			return false
		}
	}
	return true
}

// guardReader counts the bytes read and fails once a single row has taken more than limit bytes
// and needs more (mark is the row's start, set before every row); Reader.next checks the length
// of the row it got.
type guardReader struct {
	r       io.Reader
	n, mark int64
	limit   int64
}

func (g *guardReader) Read(p []byte) (int, error) {
	if g.limit > 0 && g.n-g.mark > g.limit {
		return 0, ErrRowTooLarge
	}
	k, err := g.r.Read(p)
	g.n += int64(k)
	return k, err
}
