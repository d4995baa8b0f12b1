// Package csvimport reads the CSV exports merchants upload to the product catalogue (Shopify
// product exports, Akeneo, spreadsheets): Analyze looks at a bounded sample of a file and suggests
// its delimiter, a schema and a column mapping; Reader streams its rows for the import with the
// row numbers a spreadsheet shows; Convert turns a cell into the typed value a product holds.
package csvimport

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/cohort-dev/cohort/internal/catalog"
)

// SampleBytes is how much of the start of a file Analyze reads.
const SampleBytes = 1 << 20

const (
	midWindowBytes  = 64 << 10 // second window, from the middle of the file, for the row size
	sampleRowsShown = 5
	maxSampleRows   = 10000    // rows of the sample the schema is inferred from
	sniffBytes      = 64 << 10 // delimiter sniffing looks at this much ...
	sniffRecords    = 100      // ... and at most this many records
)

// ErrBadCSV is wrapped by the errors for a file that cannot be imported at all.
var ErrBadCSV = errors.New("bad csv")

func badCSV(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadCSV, fmt.Sprintf(format, args...))
}

// Analysis is what POST /api/pim/import/csv/ answers synchronously.
type Analysis struct {
	Delimiter string   `json:"delimiter"` // "," ";" or "\t"
	Headers   []string `json:"headers"`   // as in the file (see NewReader for empty and repeated headers)
	// RowsEstimated is the number of data rows (Reader.Next calls before io.EOF, bad rows
	// included): exact when the whole file fit in the sample, else estimated from the bytes per
	// row at the start and in the middle of the file.
	RowsEstimated int64 `json:"rows_estimated"`
	// SuggestedSchema has one field per header not mapped to sku or name, in header order.
	SuggestedSchema []catalog.Field `json:"suggested_schema"`
	// SuggestedMapping maps every header to "sku", "name", the name of its field in
	// SuggestedSchema, or nil: skipped by default (an empty column, a second SKU column).
	SuggestedMapping map[string]*string `json:"suggested_mapping"`
	// SampleRows are the first data rows, header -> cell.
	SampleRows []map[string]string `json:"sample_rows"`
	// Options are the file's number and date conventions, for ConvertWith.
	Options ConvertOptions `json:"options"`
}

// Analyze reads at most SampleBytes from the start of r, plus a 64 KiB window from the middle of
// a larger file for the row size, and analyses the file: its delimiter, headers, approximate row
// count, a suggested schema and mapping, and its first rows. size is the file's size.
//
// The schema is inferred from the sample: the complete, well-formed rows in the first SampleBytes
// (the first 10,000 of them at most). A field is Required when none of its cells in the sample is
// empty, a Facet when it is a string or array with at most 50 distinct values there that repeat,
// Searchable when its header names text people search for (title, description, brand, category,
// tags...). Headers recognised as the SKU (sku, Variant SKU, article number, Artikelnummer, item
// number, product code, id, Shopify's Handle as the last resort...) and the name (name, title,
// product name, Bezeichnung, nom...) map to "sku" and "name" and get no field.
//
// A file that is empty, not UTF-8 (after an optional byte-order mark), or has no header row gives
// an error wrapping ErrBadCSV; an error reading r is returned as it is.
func Analyze(r io.ReaderAt, size int64) (*Analysis, error) {
	if size <= 0 {
		return nil, badCSV("the file is empty")
	}
	want := int(min(size, SampleBytes))
	buf := make([]byte, want)
	n, err := r.ReadAt(buf, 0)
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("csvimport: reading the file: %w", err)
	}
	buf = buf[:n]
	whole := int64(n) >= size
	if n < want { // the file is shorter than we were told
		whole, size = true, int64(n)
	}
	if err := checkEncoding(buf); err != nil {
		return nil, err
	}
	// buf keeps the byte-order mark (NewReader strips it, and only one), body is without it.
	body := bytes.TrimPrefix(buf, bomUTF8)
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, badCSV("the file is empty")
	}
	if bytes.IndexByte(body, '\n') < 0 {
		if i := bytes.IndexByte(body, '\r'); i >= 0 && len(bytes.TrimRight(body[i:], "\r")) > 0 {
			return nil, badCSV("the lines end in CR only (classic Mac); save the file as \"CSV UTF-8\"")
		}
	}
	if !whole {
		// Only complete lines: no rune or row is cut in half (the last row is dropped below, as
		// a quoted cell may span the cut).
		cut := bytes.LastIndexByte(buf, '\n')
		if cut < 0 {
			return nil, badCSV("no line break in the first %d KiB: not a CSV file, or a header row that long", SampleBytes>>10)
		}
		buf = buf[:cut+1]
		body = bytes.TrimPrefix(buf, bomUTF8)
	}
	if !utf8.Valid(body) {
		return nil, notUTF8(body)
	}

	delim := sniffDelimiter(body, whole)
	rd, err := NewReader(bytes.NewReader(buf), delim)
	if err != nil {
		return nil, err
	}
	if looksLikeData(rd.rawHeaders) {
		return nil, badCSV("no header row: the first row %q looks like data", shorten(strings.Join(rd.rawHeaders, delim)))
	}
	headerEnd := rd.BytesRead() // offsets in buf, byte-order mark included

	// Every row of the sample is counted; the first maxSampleRows good ones are kept.
	var (
		rows      [][]string
		count     int     // rows read, bad ones included
		end, prev int64   // offset in buf after the last row and the one before
		lastGood  = false // whether the last row read is the last one in rows
	)
	for {
		cells, _, err := rd.next()
		if err == io.EOF {
			break
		}
		var re *RowError
		if err != nil && !errors.As(err, &re) {
			return nil, err
		}
		count++
		prev, end = end, rd.BytesRead()
		lastGood = err == nil && len(rows) < maxSampleRows
		if lastGood {
			rows = append(rows, cells)
		}
	}
	if !whole && count > 0 { // the last row may be cut short
		count--
		end = prev
		if lastGood {
			rows = rows[:len(rows)-1]
		}
	}

	a := &Analysis{Delimiter: delim, Headers: rd.Headers()}

	// Row count.
	if whole {
		a.RowsEstimated = int64(count)
	} else {
		dataBytes := size - headerEnd
		if count == 0 {
			a.RowsEstimated = max(1, dataBytes/SampleBytes)
		} else {
			last := end
			density := float64(count) / float64(last-headerEnd) // rows per byte
			linesPerRow := float64(bytes.Count(buf[headerEnd:last], []byte{'\n'})) / float64(count)
			if off := size/2 - midWindowBytes/2; off >= SampleBytes && linesPerRow > 0 {
				w := make([]byte, min(midWindowBytes, size-off))
				k, err := r.ReadAt(w, off)
				if err != nil && err != io.EOF {
					return nil, fmt.Errorf("csvimport: reading the file: %w", err)
				}
				if k > 0 {
					mid := float64(bytes.Count(w[:k], []byte{'\n'})) / float64(k) / linesPerRow
					density = (density + mid) / 2
				}
			}
			a.RowsEstimated = max(int64(count), int64(math.Round(float64(dataBytes)*density)))
		}
	}

	a.Options = inferOptions(delim, rows)
	a.SuggestedSchema, a.SuggestedMapping = suggest(a.Headers, rows, a.Options)
	for _, row := range rows[:min(len(rows), sampleRowsShown)] {
		m := make(map[string]string, len(a.Headers))
		for i, h := range a.Headers {
			m[h] = row[i]
		}
		a.SampleRows = append(a.SampleRows, m)
	}
	if a.SampleRows == nil {
		a.SampleRows = []map[string]string{}
	}
	if a.SuggestedSchema == nil {
		a.SuggestedSchema = []catalog.Field{}
	}
	return a, nil
}

// shorten cuts a text quoted in an error message.
func shorten(s string) string {
	if utf8.RuneCountInString(s) <= 80 {
		return s
	}
	return string([]rune(s)[:77]) + "..."
}

// checkEncoding recognises files that are not text CSV at all.
func checkEncoding(b []byte) error {
	switch {
	case bytes.HasPrefix(b, bomUTF16LE) || bytes.HasPrefix(b, bomUTF16BE):
		return badCSV("the file is UTF-16; save it as \"CSV UTF-8\"")
	case bytes.HasPrefix(b, []byte("PK\x03\x04")):
		return badCSV("this is an Excel workbook (.xlsx) or another ZIP file, not CSV; save it as \"CSV UTF-8\"")
	case bytes.HasPrefix(b, []byte{0xD0, 0xCF, 0x11, 0xE0}):
		return badCSV("this is an old Excel workbook (.xls), not CSV; save it as \"CSV UTF-8\"")
	case bytes.IndexByte(b, 0) >= 0:
		return badCSV("the file contains NUL bytes: not a text file (UTF-16 without a byte-order mark?)")
	}
	return nil
}

// notUTF8 describes where b stops being UTF-8.
func notUTF8(b []byte) error {
	i := 0
	for i < len(b) {
		r, w := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && w == 1 {
			break
		}
		i += w
	}
	line := 1 + bytes.Count(b[:i], []byte{'\n'})
	return badCSV("not UTF-8: byte 0x%02X on line %d (Windows-1252 or Latin-1?); save the file as \"CSV UTF-8\"", b[min(i, len(b)-1)], line)
}

// looksLikeData reports a first row whose cells are all numbers, dates or URLs: a file without a
// header row.
func looksLikeData(header []string) bool {
	seen := false
	for _, h := range header {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		seen = true
		_, num := parseNumber(h, false)
		_, numComma := parseNumber(h, true)
		_, date := parseDate(h, false)
		_, link := parseURL(h)
		if !num && !numComma && !date && !link {
			return false
		}
	}
	return seen
}

// sniffDelimiter picks among ',', ';' and '\t' the one that splits the header into more than one
// field and the first records into as many: the most consistent wins (at least 90% of the records
// matching the header counts as consistent), then the most fields, then the order , ; \t.
func sniffDelimiter(buf []byte, whole bool) string {
	s, truncated := buf, !whole
	if len(s) > sniffBytes {
		if i := bytes.LastIndexByte(s[:sniffBytes], '\n'); i > 0 {
			s, truncated = s[:i+1], true
		}
	}
	best, bestRatio, bestFields, bestConsistent := ",", -1.0, 0, false
	for _, d := range []rune{',', ';', '\t'} {
		cr := csv.NewReader(bytes.NewReader(s))
		cr.Comma = d
		cr.FieldsPerRecord = -1
		cr.ReuseRecord = true
		hdr, err := cr.Read()
		if err != nil || len(hdr) <= 1 {
			continue
		}
		h := len(hdr)
		var matches []bool
		for len(matches) <= sniffRecords {
			rec, err := cr.Read()
			if err == io.EOF {
				break
			}
			matches = append(matches, err == nil && len(rec) == h)
		}
		if truncated && len(matches) > 1 {
			matches = matches[:len(matches)-1]
		}
		ratio := 1.0
		if len(matches) > 0 {
			ok := 0
			for _, m := range matches {
				if m {
					ok++
				}
			}
			ratio = float64(ok) / float64(len(matches))
		}
		consistent := ratio >= 0.9
		better := false
		switch {
		case consistent != bestConsistent:
			better = consistent
		case consistent:
			better = h > bestFields
		default:
			better = ratio > bestRatio || (ratio == bestRatio && h > bestFields)
		}
		if better {
			best, bestRatio, bestFields, bestConsistent = string(d), ratio, h, consistent
		}
	}
	return best
}

// inferOptions reads the file's conventions from its cells: a date like 25/03/2024 says day
// first, 03/25/2024 month first; "12,5" or "1.234,56" says decimal comma, "12.5" or "1,234.56"
// decimal point. Without evidence (or with as much for both) the delimiter decides (OptionsFor).
func inferOptions(delim string, rows [][]string) ConvertOptions {
	opts := OptionsFor(delim)
	var dayFirst, monthFirst, comma, dot int
	for _, row := range rows {
		for _, c := range row {
			c = strings.TrimSpace(c)
			if c == "" || len(c) > 40 {
				continue
			}
			switch dateOrder(c) {
			case 1:
				dayFirst++
			case -1:
				monthFirst++
			}
			switch decimalSeparator(c) {
			case ',':
				comma++
			case '.':
				dot++
			}
		}
	}
	if dayFirst != monthFirst {
		opts.DayFirst = dayFirst > monthFirst
	}
	if comma != dot {
		opts.DecimalComma = comma > dot
	}
	return opts
}

// dateOrder is 1 for a date that can only be day-first (25/03/2024, 1.3.2024), -1 for one that
// can only be month-first (03/25/2024), else 0.
func dateOrder(s string) int {
	s, _, _ = strings.Cut(s, " ")
	i := strings.IndexAny(s, "/-.")
	if i <= 0 {
		return 0
	}
	sep := s[i]
	parts := strings.Split(s, string(sep))
	if len(parts) != 3 || len(parts[0]) > 2 || len(parts[1]) > 2 || (len(parts[2]) != 2 && len(parts[2]) != 4) {
		return 0
	}
	if _, _, _, ok := parseNumericDate(s, true); !ok {
		return 0
	}
	a, b := atoi2(parts[0]), atoi2(parts[1])
	switch {
	case sep == '.' || a > 12:
		return 1
	case b > 12:
		return -1
	}
	return 0
}

func atoi2(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		n = n*10 + int(s[i]-'0')
	}
	return n
}

// decimalSeparator is the decimal separator a number (or price) unambiguously uses, or 0.
func decimalSeparator(s string) byte {
	amount, _ := stripCurrency(s)
	if _, ok := normalizeNumber(amount, false, false); !ok || strings.ContainsAny(amount, "eE") {
		return 0
	}
	lastDot, lastComma := strings.LastIndexByte(amount, '.'), strings.LastIndexByte(amount, ',')
	dots, commas := strings.Count(amount, "."), strings.Count(amount, ",")
	switch {
	case dots > 0 && commas > 0:
		if lastComma > lastDot {
			return ','
		}
		return '.'
	case dots+commas != 1:
		return 0
	}
	i := max(lastDot, lastComma)
	before, after := strings.TrimLeft(amount[:i], "+-"), amount[i+1:]
	if len(after) == 3 && before != "0" && before != "" {
		return 0 // 1,234 / 1.234: thousands or decimals
	}
	return amount[i]
}
