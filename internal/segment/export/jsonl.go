package export

import (
	"bufio"
	"fmt"
	"io"
	"math"

	"github.com/cohort-dev/cohort/internal/jsonenc"
)

type jsonlWriter struct {
	bw     *bufio.Writer
	opts   Options
	keys   [][]byte // the trait keys as JSON strings with their colon: "plan":
	enc    *encoder
	line   []byte
	rows   int64
	err    error // sticky: the first write error, or errClosed
	closed bool
	cerr   error // Close's result
}

func newJSONLWriter(w io.Writer, o Options) *jsonlWriter {
	j := &jsonlWriter{
		bw:   bufio.NewWriterSize(w, bufferSize),
		opts: o,
		enc:  newEncoder(),
	}
	for _, k := range o.TraitKeys {
		j.keys = append(j.keys, append(jsonenc.AppendString(nil, k), ':'))
	}
	return j
}

func (j *jsonlWriter) Write(r Row) error {
	if j.err != nil {
		return j.err
	}
	b := append(j.line[:0], `{"user_id":`...)
	b = jsonenc.AppendString(b, r.UserID)
	b = append(b, `,"computed_at":"`...)
	b = utc(r.ComputedAt).AppendFormat(b, rfc3339Milli)
	b = append(b, '"')
	if j.opts.WithScore {
		b = append(b, `,"score":`...)
		if r.Score != nil && !math.IsNaN(*r.Score) && !math.IsInf(*r.Score, 0) {
			b = appendJSONFloat(b, *r.Score)
		} else {
			b = append(b, "null"...)
		}
	}
	if len(j.keys) > 0 {
		b = append(b, `,"traits":{`...)
		first := true
		for i, k := range j.opts.TraitKeys {
			v, ok := r.Traits[k]
			if !ok {
				continue
			}
			if !first {
				b = append(b, ',')
			}
			mark := len(b)
			b = append(b, j.keys[i]...)
			var (
				kind valueKind
				err  error
			)
			b, kind, err = j.enc.appendJSON(b, v)
			if err != nil {
				j.line = b
				return fmt.Errorf("user %q: trait %q: %w", validUTF8(r.UserID), k, err)
			}
			if kind == kindNull {
				// nil, NaN or infinity: present but null.
				b = append(b[:mark+len(j.keys[i])], "null"...)
			}
			first = false
		}
		b = append(b, '}')
	}
	b = append(b, '}', '\n')
	j.line = b
	if _, err := j.bw.Write(b); err != nil {
		j.err = fmt.Errorf("write jsonl: %w", err)
		return j.err
	}
	j.rows++
	return nil
}

func (j *jsonlWriter) Close() error {
	if j.closed {
		return j.cerr
	}
	j.closed = true
	if j.err == nil {
		if err := j.bw.Flush(); err != nil {
			j.cerr = fmt.Errorf("write jsonl: %w", err)
		}
	} else {
		j.cerr = j.err
	}
	j.err = errClosed
	return j.cerr
}

func (j *jsonlWriter) Rows() int64 { return j.rows }
