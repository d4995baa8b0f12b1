package export

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"strconv"
)

// bufferSize is the output buffer of the CSV and JSON Lines writers.
const bufferSize = 64 << 10

type csvWriter struct {
	bw      *bufio.Writer
	cw      *csv.Writer
	opts    Options
	enc     *encoder
	record  []string
	scratch []byte
	rows    int64
	err     error // sticky: the first write error, or errClosed
	closed  bool
	cerr    error // Close's result
}

func newCSVWriter(w io.Writer, o Options) (*csvWriter, error) {
	bw := bufio.NewWriterSize(w, bufferSize)
	c := &csvWriter{
		bw:   bw,
		cw:   csv.NewWriter(bw), // uses bw itself: it is already a large enough bufio.Writer
		opts: o,
		enc:  newEncoder(),
	}
	header := make([]string, 0, 3+len(o.TraitKeys))
	header = append(header, colUserID, colComputedAt)
	if o.WithScore {
		header = append(header, colScore)
	}
	for _, k := range o.TraitKeys {
		header = append(header, guardFormula(k))
	}
	if err := c.cw.Write(header); err != nil {
		return nil, fmt.Errorf("write csv header: %w", err)
	}
	c.record = make([]string, len(header))
	return c, nil
}

func (c *csvWriter) Write(r Row) error {
	if c.err != nil {
		return c.err
	}
	rec := c.record[:0]
	rec = append(rec, guardFormula(validUTF8(r.UserID)))
	c.scratch = utc(r.ComputedAt).AppendFormat(c.scratch[:0], rfc3339Milli)
	rec = append(rec, string(c.scratch))
	if c.opts.WithScore {
		s := ""
		if r.Score != nil && !math.IsNaN(*r.Score) && !math.IsInf(*r.Score, 0) {
			s = strconv.FormatFloat(*r.Score, 'f', -1, 64)
		}
		rec = append(rec, s)
	}
	for _, k := range c.opts.TraitKeys {
		b, kind, err := c.enc.appendText(c.scratch[:0], r.Traits[k])
		if err != nil {
			return fmt.Errorf("user %q: trait %q: %w", validUTF8(r.UserID), k, err)
		}
		c.scratch = b
		s := string(b)
		if kind != kindNumber {
			s = guardFormula(s)
		}
		rec = append(rec, s)
	}
	if err := c.cw.Write(rec); err != nil {
		c.err = fmt.Errorf("write csv: %w", err)
		return c.err
	}
	c.rows++
	return nil
}

func (c *csvWriter) Close() error {
	if c.closed {
		return c.cerr
	}
	c.closed = true
	if c.err == nil {
		c.cw.Flush()
		if err := c.cw.Error(); err != nil {
			c.cerr = fmt.Errorf("write csv: %w", err)
		}
	} else {
		c.cerr = c.err
	}
	c.err = errClosed
	return c.cerr
}

func (c *csvWriter) Rows() int64 { return c.rows }

// guardFormula defuses CSV (formula) injection by the OWASP rule: a cell that starts with
// = + - @ tab or carriage return gets a leading single quote, so spreadsheets show it as text.
func guardFormula(s string) string {
	if s != "" {
		switch s[0] {
		case '=', '+', '-', '@', '\t', '\r':
			return "'" + s
		}
	}
	return s
}
