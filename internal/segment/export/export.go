// Package export writes a segment's members to a downloadable file, streaming: rows go out as
// they are written, so an export of millions of members needs bounded memory.
//
// Every format has the same columns, in this order:
//
//	user_id      the member's user id
//	computed_at  when the membership was computed, UTC, millisecond precision
//	score        lookalike similarity percentile 0..100, only with Options.WithScore;
//	             null for rule segments (and for a NaN or infinite score)
//	<trait key>  one column per Options.TraitKeys entry, named exactly the key
//
// The formats:
//
//   - Parquet (application/vnd.apache.parquet): user_id is a required UTF8 string,
//     computed_at a required INT64 TIMESTAMP(MILLIS, isAdjustedToUTC=true), score an optional
//     DOUBLE and every trait an optional UTF8 string holding the value as text (strings as they
//     are, numbers and booleans as JSON writes them, objects and arrays JSON-encoded, a missing
//     or null trait is null). Written by parquet-go's standard writer with the widely read
//     choices: Snappy, v1 data pages, PLAIN user ids, dictionary-encoded traits, and a row group
//     every 100,000 rows, which is also what bounds the writer's memory.
//   - CSV (text/csv; charset=utf-8): RFC 4180 quoting (encoding/csv, LF line ends) under a
//     header row; computed_at in RFC 3339 with milliseconds (2026-11-21T09:30:00.123Z); score as
//     the shortest decimal that reads back exactly, never in exponent form, empty when null;
//     traits as text, empty when missing or null (so a missing trait and an empty string read
//     the same). Cells that a spreadsheet would take for a formula, those starting with
//     = + - @ tab or CR, get a leading single quote (the OWASP rule), header cells included;
//     numbers (the score and numeric trait values) are never quoted so.
//   - JSON Lines (application/x-ndjson): one object per line,
//     {"user_id":"u1","computed_at":"2026-11-21T09:30:00.123Z","score":97.5,"traits":{"plan":"pro"}};
//     "score" is present only with WithScore (null when nil), "traits" only with TraitKeys and
//     holds the requested keys the row has (a null trait stays null), values keeping their JSON
//     types.
//
// Invalid UTF-8 never reaches a file: in user ids and trait values every invalid byte becomes
// U+FFFD, and NewWriter rejects trait keys that are not valid UTF-8.
package export

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cohort-dev/cohort/internal/errs"
)

// Format is an export file format.
type Format string

// The export formats.
const (
	Parquet Format = "parquet"
	CSV     Format = "csv"
	JSONL   Format = "jsonl"
)

// rowGroupRows is the number of rows per parquet row group: the writer holds one row group
// in memory (compressed pages) before writing it out: under 20 MiB of heap with a score and
// six short traits.
const rowGroupRows = 100_000

const formatList = "parquet, csv, jsonl"

// ParseFormat accepts "parquet", "csv" and "jsonl", case-insensitive, surrounding spaces
// trimmed. Any other value is an error matching errs.ErrInvalid that lists the allowed values.
func ParseFormat(s string) (Format, error) {
	switch f := Format(strings.ToLower(strings.TrimSpace(s))); f {
	case Parquet, CSV, JSONL:
		return f, nil
	}
	return "", errs.Invalid("format", "must be one of "+formatList)
}

// ContentType is the MIME type of the format, for the blob's Content-Type.
func (f Format) ContentType() string {
	switch f {
	case Parquet:
		return "application/vnd.apache.parquet"
	case CSV:
		return "text/csv; charset=utf-8"
	case JSONL:
		return "application/x-ndjson"
	}
	return "application/octet-stream"
}

// Ext is the file name extension of the format, with its dot.
func (f Format) Ext() string {
	switch f {
	case Parquet, CSV, JSONL:
		return "." + string(f)
	}
	return ""
}

// Row is one segment member.
type Row struct {
	UserID     string
	ComputedAt time.Time      // always written in UTC
	Score      *float64       // lookalike similarity percentile 0..100; nil for rule segments
	Traits     map[string]any // profile traits (JSON-decoded values); only keys in Options.TraitKeys are written
}

// Options choose the optional columns.
type Options struct {
	// TraitKeys adds one column per key, in this order, named exactly the key. Repeated keys
	// are written once; NewWriter rejects empty keys, keys that are not valid UTF-8 and the
	// names of the fixed columns (user_id, computed_at, score).
	TraitKeys []string
	// WithScore adds the score column (a nullable double).
	WithScore bool
}

// Writer streams rows to an io.Writer. It is not safe for concurrent use.
type Writer interface {
	// Write adds one row. A row with a trait value that cannot be encoded as JSON is
	// rejected and the writer stays usable; an error writing the output is sticky (every
	// later Write and Close return it, and the output is incomplete). Parquet rows are
	// handed over in small batches, so an output error may surface a few rows late.
	Write(r Row) error
	// Close flushes everything (for parquet, the last row group and the footer) but does not
	// close the underlying io.Writer. Without a successful Close the file is incomplete.
	// Writes after Close fail; closing again returns the first Close's result.
	Close() error
	// Rows is the number of rows accepted so far.
	Rows() int64
}

// Column names of the fixed columns.
const (
	colUserID     = "user_id"
	colComputedAt = "computed_at"
	colScore      = "score"
)

// errClosed is returned by Write after Close.
var errClosed = errors.New("export writer is closed")

// NewWriter returns a Writer of format f writing to w, with the columns chosen by o.
// Invalid formats and trait keys are errors matching errs.ErrInvalid.
func NewWriter(w io.Writer, f Format, o Options) (Writer, error) {
	if w == nil {
		return nil, errors.New("nil io.Writer")
	}
	keys, err := traitKeys(o.TraitKeys)
	if err != nil {
		return nil, err
	}
	o.TraitKeys = keys
	switch f {
	case Parquet:
		return newParquetWriter(w, o)
	case CSV:
		return newCSVWriter(w, o)
	case JSONL:
		return newJSONLWriter(w, o), nil
	}
	return nil, errs.Invalid("format", "must be one of "+formatList)
}

// traitKeys validates and dedupes the trait keys, keeping the first occurrence's position.
func traitKeys(in []string) ([]string, error) {
	if len(in) == 0 {
		return nil, nil
	}
	fields := errs.Fields{}
	seen := make(map[string]bool, len(in))
	out := make([]string, 0, len(in))
	for i, k := range in {
		field := fmt.Sprintf("trait_keys[%d]", i)
		switch {
		case strings.TrimSpace(k) == "":
			fields.Add(field, "is empty")
		case !utf8.ValidString(k):
			fields.Add(field, "is not valid UTF-8")
		case k == colUserID || k == colComputedAt || k == colScore:
			fields.Add(field, "%q is the name of a fixed column", k)
		case !seen[k]:
			seen[k] = true
			out = append(out, k)
		}
	}
	if err := fields.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// utc is t in UTC truncated to the millisecond, the precision of every format.
func utc(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

// rfc3339Milli is RFC 3339 with exactly three fractional digits; in UTC it ends in Z.
const rfc3339Milli = "2006-01-02T15:04:05.000Z07:00"
