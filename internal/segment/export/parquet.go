package export

import (
	"fmt"
	"io"
	"math"
	"reflect"
	"strings"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/encoding"
)

// batchRows is how many rows the parquet writer collects before handing them to parquet-go.
const batchRows = 512

type parquetWriter struct {
	pw     *parquet.Writer
	opts   Options
	enc    *encoder
	batch  []parquet.Row
	n      int    // rows in batch
	arena  []byte // bytes of the batch's strings; values point into it
	rows   int64
	err    error // sticky: the first write error, or errClosed
	closed bool
	cerr   error // Close's result
}

func newParquetWriter(w io.Writer, o Options) (*parquetWriter, error) {
	schema := parquetSchema(o)
	cfg, err := parquet.NewWriterConfig(
		schema,
		parquet.Compression(compressionCodec),
		parquet.MaxRowsPerRowGroup(rowGroupRows),
		// v1 data pages are the most widely read; pyarrow and parquet-mr write them by default.
		parquet.DataPageVersion(1),
	)
	if err != nil {
		return nil, fmt.Errorf("configure parquet writer: %w", err)
	}
	p := &parquetWriter{
		pw:    parquet.NewWriter(w, cfg),
		opts:  o,
		enc:   newEncoder(),
		batch: make([]parquet.Row, batchRows),
	}
	cols := len(schema.Columns())
	for i := range p.batch {
		p.batch[i] = make(parquet.Row, 0, cols)
	}
	return p, nil
}

// compressionCodec is Snappy: the codec every parquet reader supports, and cheap to write.
var compressionCodec compress.Codec = &parquet.Snappy

// parquetSchema is the file's schema: user_id, computed_at, [score], [traits...], in this order.
func parquetSchema(o Options) *parquet.Schema {
	// Encodings are the ones every reader knows (PLAIN, RLE_DICTIONARY), not parquet-go's
	// default DELTA_LENGTH_BYTE_ARRAY for strings. Trait values repeat (plans, countries), so
	// they are dictionary-encoded; a dictionary lives for one row group, which bounds it.
	g := &orderedGroup{}
	g.add(colUserID, parquet.Encoded(parquet.String(), &parquet.Plain))
	g.add(colComputedAt, parquet.Timestamp(parquet.Millisecond))
	if o.WithScore {
		g.add(colScore, parquet.Optional(parquet.Leaf(parquet.DoubleType)))
	}
	for _, k := range o.TraitKeys {
		g.add(k, parquet.Optional(parquet.Encoded(parquet.String(), &parquet.RLEDictionary)))
	}
	return parquet.NewSchema("segment_export", g)
}

func (p *parquetWriter) Write(r Row) error {
	if p.err != nil {
		return p.err
	}
	// String values point into the arena, or into the older arrays it leaves behind when
	// append grows it; those stay alive and unchanged until the batch is written.
	row := p.batch[p.n][:0]
	arena := p.arena
	col := 0

	start := len(arena)
	arena = appendValidUTF8(arena, r.UserID)
	row = append(row, parquet.ByteArrayValue(arena[start:len(arena):len(arena)]).Level(0, 0, col))
	col++
	row = append(row, parquet.Int64Value(utc(r.ComputedAt).UnixMilli()).Level(0, 0, col))
	col++
	if p.opts.WithScore {
		if r.Score != nil && !math.IsNaN(*r.Score) && !math.IsInf(*r.Score, 0) {
			row = append(row, parquet.DoubleValue(*r.Score).Level(0, 1, col))
		} else {
			row = append(row, parquet.NullValue().Level(0, 0, col))
		}
		col++
	}
	for _, k := range p.opts.TraitKeys {
		start = len(arena)
		b, kind, err := p.enc.appendText(arena, r.Traits[k])
		if err != nil {
			p.arena = arena
			p.batch[p.n] = row
			return fmt.Errorf("user %q: trait %q: %w", validUTF8(r.UserID), k, err)
		}
		arena = b
		if kind == kindNull {
			row = append(row, parquet.NullValue().Level(0, 0, col))
		} else {
			row = append(row, parquet.ByteArrayValue(arena[start:len(arena):len(arena)]).Level(0, 1, col))
		}
		col++
	}
	p.arena = arena
	p.batch[p.n] = row
	p.n++
	p.rows++
	if p.n == len(p.batch) {
		return p.flushBatch()
	}
	return nil
}

// flushBatch hands the batched rows to parquet-go, which copies them into its column buffers
// (writing out a row group every rowGroupRows rows), then reuses the batch and arena.
func (p *parquetWriter) flushBatch() error {
	if p.n == 0 {
		return nil
	}
	_, err := p.pw.WriteRows(p.batch[:p.n])
	p.n = 0
	p.arena = p.arena[:0]
	if err != nil {
		p.err = fmt.Errorf("write parquet: %w", err)
		return p.err
	}
	return nil
}

func (p *parquetWriter) Close() error {
	if p.closed {
		return p.cerr
	}
	p.closed = true
	if p.err == nil {
		if err := p.flushBatch(); err != nil {
			p.cerr = err
		} else if err := p.pw.Close(); err != nil {
			p.cerr = fmt.Errorf("write parquet: %w", err)
		}
	} else {
		p.cerr = p.err
	}
	p.err = errClosed
	p.batch, p.arena = nil, nil
	return p.cerr
}

func (p *parquetWriter) Rows() int64 { return p.rows }

// orderedGroup is a parquet group whose fields keep the order they were added in;
// parquet.Group is a map and sorts its fields by name.
type orderedGroup struct {
	fields []parquet.Field
}

func (g *orderedGroup) add(name string, n parquet.Node) {
	g.fields = append(g.fields, &orderedField{Node: n, name: name})
}

func (g *orderedGroup) ID() int { return 0 }

func (g *orderedGroup) String() string {
	var b strings.Builder
	_ = parquet.PrintSchema(&b, "", g)
	return b.String()
}

func (g *orderedGroup) Type() parquet.Type          { return parquet.Group{}.Type() }
func (g *orderedGroup) Optional() bool              { return false }
func (g *orderedGroup) Repeated() bool              { return false }
func (g *orderedGroup) Required() bool              { return true }
func (g *orderedGroup) Leaf() bool                  { return false }
func (g *orderedGroup) Fields() []parquet.Field     { return g.fields }
func (g *orderedGroup) Encoding() encoding.Encoding { return nil }
func (g *orderedGroup) Compression() compress.Codec { return nil }
func (g *orderedGroup) GoType() reflect.Type        { return reflect.TypeFor[map[string]any]() }

type orderedField struct {
	parquet.Node
	name string
}

func (f *orderedField) Name() string { return f.name }

// Value looks the field up in a map, like parquet.Group's fields do. The export writes
// parquet.Row values and never deconstructs Go values, but the interface requires it.
func (f *orderedField) Value(base reflect.Value) reflect.Value {
	if base.Kind() == reflect.Interface {
		if base.IsNil() {
			return reflect.Value{}
		}
		base = base.Elem()
	}
	if base.Kind() != reflect.Map {
		return reflect.Value{}
	}
	return base.MapIndex(reflect.ValueOf(f.name))
}
