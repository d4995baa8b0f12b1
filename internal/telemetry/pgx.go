package telemetry

import (
	"context"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// pgxTracerName is the instrumentation scope of the database spans.
const pgxTracerName = "github.com/cohort-dev/cohort/internal/telemetry/pgx"

// MaxStatementBytes caps the SQL text recorded on a span.
const MaxStatementBytes = 2048

// PgxTracer traces pgx queries, batches and COPYs (pgx.QueryTracer, BatchTracer, CopyFromTracer)
// as client spans: db.system=postgresql, the statement's text (truncated to MaxStatementBytes;
// argument values are never recorded), the database and server, rows affected and the error.
//
// A span is started only under a span the caller already has (an HTTP request, an activity, a
// bus delivery): background polls and pings outside any operation would otherwise each start a
// trace of their own.
type PgxTracer struct{}

var (
	_ pgx.QueryTracer    = PgxTracer{}
	_ pgx.BatchTracer    = PgxTracer{}
	_ pgx.CopyFromTracer = PgxTracer{}
)

// pgxSpanKey marks the span this tracer started in the context it hands to pgx, so that the
// matching End finds it (and never ends the caller's own span).
type pgxSpanKey struct{}

func (PgxTracer) start(ctx context.Context, conn *pgx.Conn, name string, attrs ...attribute.KeyValue) context.Context {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	attrs = append(attrs, attribute.String("db.system", "postgresql"))
	if conn != nil {
		if c := conn.Config(); c != nil {
			attrs = append(attrs,
				attribute.String("db.name", c.Database),
				attribute.String("server.address", c.Host),
				attribute.Int("server.port", int(c.Port)))
		}
	}
	ctx, span := otel.Tracer(pgxTracerName).Start(ctx, name,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return context.WithValue(ctx, pgxSpanKey{}, span)
}

func (PgxTracer) end(ctx context.Context, rows int64, err error) {
	span, ok := ctx.Value(pgxSpanKey{}).(trace.Span)
	if !ok {
		return
	}
	if rows >= 0 {
		span.SetAttributes(attribute.Int64("db.rows_affected", rows))
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// TraceQueryStart implements pgx.QueryTracer.
func (t PgxTracer) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	op := sqlOperation(data.SQL)
	return t.start(ctx, conn, spanName(op, conn),
		attribute.String("db.operation", op),
		attribute.String("db.statement", Statement(data.SQL)))
}

// TraceQueryEnd implements pgx.QueryTracer.
func (t PgxTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	t.end(ctx, data.CommandTag.RowsAffected(), data.Err)
}

// TraceBatchStart implements pgx.BatchTracer: one span for the batch, each query an event on it.
func (t PgxTracer) TraceBatchStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	n := 0
	if data.Batch != nil {
		n = data.Batch.Len()
	}
	return t.start(ctx, conn, spanName("BATCH", conn),
		attribute.String("db.operation", "BATCH"), attribute.Int("db.batch.size", n))
}

// TraceBatchQuery implements pgx.BatchTracer.
func (PgxTracer) TraceBatchQuery(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	span, ok := ctx.Value(pgxSpanKey{}).(trace.Span)
	if !ok {
		return
	}
	attrs := []attribute.KeyValue{
		attribute.String("db.statement", Statement(data.SQL)),
		attribute.Int64("db.rows_affected", data.CommandTag.RowsAffected()),
	}
	if data.Err != nil {
		attrs = append(attrs, attribute.String("error.message", data.Err.Error()))
	}
	span.AddEvent("query", trace.WithAttributes(attrs...))
}

// TraceBatchEnd implements pgx.BatchTracer.
func (t PgxTracer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchEndData) {
	t.end(ctx, -1, data.Err)
}

// TraceCopyFromStart implements pgx.CopyFromTracer.
func (t PgxTracer) TraceCopyFromStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceCopyFromStartData) context.Context {
	table := data.TableName.Sanitize()
	return t.start(ctx, conn, "COPY "+table,
		attribute.String("db.operation", "COPY"),
		attribute.String("db.sql.table", table),
		attribute.String("db.statement", Statement("COPY "+table+" ("+strings.Join(data.ColumnNames, ", ")+") FROM STDIN")))
}

// TraceCopyFromEnd implements pgx.CopyFromTracer.
func (t PgxTracer) TraceCopyFromEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceCopyFromEndData) {
	t.end(ctx, data.CommandTag.RowsAffected(), data.Err)
}

// Statement is sql as recorded on a span: trimmed and cut to MaxStatementBytes on a character
// boundary, with a marker when cut.
func Statement(sql string) string {
	sql = strings.TrimSpace(sql)
	if len(sql) <= MaxStatementBytes {
		return sql
	}
	cut := MaxStatementBytes
	for cut > 0 && !utf8.RuneStart(sql[cut]) {
		cut--
	}
	return sql[:cut] + " …(" + strconv.Itoa(len(sql)) + " bytes)"
}

// sqlOperation is the statement's first keyword, upper-cased (SELECT, INSERT, WITH ...).
func sqlOperation(sql string) string {
	sql = strings.TrimSpace(sql)
	for strings.HasPrefix(sql, "--") || strings.HasPrefix(sql, "/*") {
		var rest string
		var ok bool
		if strings.HasPrefix(sql, "--") {
			_, rest, ok = strings.Cut(sql, "\n")
		} else {
			_, rest, ok = strings.Cut(sql, "*/")
		}
		if !ok {
			return ""
		}
		sql = strings.TrimSpace(rest)
	}
	end := strings.IndexFunc(sql, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	})
	if end < 0 {
		end = len(sql)
	}
	return strings.ToUpper(sql[:end])
}

// spanName is "{operation} {database}" (semantic conventions), e.g. "SELECT cohort".
func spanName(op string, conn *pgx.Conn) string {
	if op == "" {
		op = "postgresql"
	}
	if conn != nil && conn.Config() != nil && conn.Config().Database != "" {
		return op + " " + conn.Config().Database
	}
	return op
}
