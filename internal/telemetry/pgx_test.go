package telemetry_test

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/cohort-dev/cohort/internal/telemetry"
	"github.com/cohort-dev/cohort/internal/testenv"
)

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]string {
	m := map[attribute.Key]string{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value.Emit()
	}
	return m
}

// The store's pool (store.Open) traces queries, batches and COPY under the caller's span, with
// the statement's text and never its arguments; a query outside any span makes none.
func TestPgxTracerOnStorePool(t *testing.T) {
	restoreGlobals(t)
	db := testenv.OpenDB(t)
	rec := tracetest.NewSpanRecorder()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	ctx := context.Background()

	// Outside a span: nothing.
	if _, err := db.Pool.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	if n := len(rec.Ended()); n != 0 {
		t.Fatalf("%d spans for a query without a parent span", n)
	}

	pctx, parent := otel.Tracer("test").Start(ctx, "request")
	conn, err := db.Pool.Acquire(pctx) // one connection: the temp table is per session
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(pctx, "CREATE TEMP TABLE t (id int, name text)"); err != nil {
		t.Fatal(err)
	}
	const secret = "s3cr3t-value"
	if _, err := conn.Exec(pctx, "INSERT INTO t (id, name) VALUES ($1, $2)", 1, secret); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.CopyFrom(pctx, pgx.Identifier{"t"}, []string{"id", "name"}, pgx.CopyFromRows([][]any{{2, "b"}, {3, "c"}})); err != nil {
		t.Fatal(err)
	}
	b := &pgx.Batch{}
	b.Queue("SELECT count(*) FROM t")
	b.Queue("UPDATE t SET name = $1 WHERE id = $2", secret, 2)
	if err := conn.SendBatch(pctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(pctx, "SELECT * FROM no_such_table")
	if err == nil {
		t.Fatal("query on a missing table succeeded")
	}
	parent.End()

	var spans []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.SpanContext().TraceID() == parent.SpanContext().TraceID() && s.Name() != "request" {
			spans = append(spans, s)
		}
	}
	dbName := conn.Conn().Config().Database
	want := []struct {
		name, op, stmt, rows string
		err                  bool
	}{
		{"CREATE " + dbName, "CREATE", "CREATE TEMP TABLE t (id int, name text)", "0", false},
		{"INSERT " + dbName, "INSERT", "INSERT INTO t (id, name) VALUES ($1, $2)", "1", false},
		{`COPY "t"`, "COPY", `COPY "t" (id, name) FROM STDIN`, "2", false},
		{"BATCH " + dbName, "BATCH", "", "", false},
		{"SELECT " + dbName, "SELECT", "SELECT * FROM no_such_table", "0", true},
	}
	if len(spans) != len(want) {
		var names []string
		for _, s := range spans {
			names = append(names, s.Name())
		}
		t.Fatalf("spans %v, want %d", names, len(want))
	}
	for i, w := range want {
		s, a := spans[i], attrs(spans[i])
		if s.Name() != w.name || a["db.operation"] != w.op || a["db.statement"] != w.stmt || a["db.rows_affected"] != w.rows {
			t.Errorf("span %d: %q %v, want %+v", i, s.Name(), a, w)
		}
		if a["db.system"] != "postgresql" || a["db.name"] != dbName || s.SpanKind() != trace.SpanKindClient {
			t.Errorf("span %d: system %q db %q kind %v", i, a["db.system"], a["db.name"], s.SpanKind())
		}
		if s.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("span %d is not a child of the caller's span", i)
		}
		if (s.Status().Code.String() == "Error") != w.err {
			t.Errorf("span %d status %v, want error %v", i, s.Status(), w.err)
		}
		for _, kv := range s.Attributes() {
			if strings.Contains(kv.Value.Emit(), secret) {
				t.Errorf("span %d records an argument value in %s", i, kv.Key)
			}
		}
	}
	batch := spans[3]
	if ev := batch.Events(); len(ev) != 2 || ev[1].Name != "query" {
		t.Fatalf("batch events %v, want one per query", ev)
	}
	for _, kv := range batch.Events()[1].Attributes {
		if kv.Key == "db.statement" && kv.Value.AsString() != "UPDATE t SET name = $1 WHERE id = $2" {
			t.Errorf("batch query statement %q", kv.Value.AsString())
		}
		if strings.Contains(kv.Value.Emit(), secret) {
			t.Errorf("batch event records an argument value in %s", kv.Key)
		}
	}
}

func TestStatementTruncated(t *testing.T) {
	short := "SELECT 1"
	if got := telemetry.Statement("  " + short + "\n"); got != short {
		t.Errorf("Statement(short) = %q", got)
	}
	long := "SELECT '" + strings.Repeat("é", telemetry.MaxStatementBytes) + "'"
	got := telemetry.Statement(long)
	if len(got) > telemetry.MaxStatementBytes+32 || !utf8.ValidString(got) || !strings.HasSuffix(got, "bytes)") {
		t.Errorf("Statement(long) = %d bytes, valid %v, ends %q", len(got), utf8.ValidString(got), got[len(got)-12:])
	}
}
