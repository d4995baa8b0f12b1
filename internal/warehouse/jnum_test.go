package warehouse_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cohort-dev/cohort/internal/testenv"
	"github.com/cohort-dev/cohort/internal/warehouse"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The loader's rollups read payload properties as numbers with JNum, segment queries with the SQL
// function warehouse.jnum: the function in the database holds JNumPattern, and both read every
// value of the table alike (a number, or NULL).
func TestJNumAgreesWithSQL(t *testing.T) {
	pool := testenv.OpenDB(t).Pool
	ctx := context.Background()
	var src string
	if err := pool.QueryRow(ctx, `SELECT prosrc FROM pg_proc WHERE oid = 'warehouse.jnum(jsonb)'::regprocedure`).Scan(&src); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(src, "'"+warehouse.JNumPattern+"'") {
		t.Fatalf("warehouse.jnum does not hold JNumPattern %s:\n%s", warehouse.JNumPattern, src)
	}
	values := []string{
		// JSON numbers
		`0`, `12`, `-3`, `12.50`, `-0.125`, `1e3`, `1E-2`, `-4e2`, `123456789012345678901234567890`,
		// numeric strings
		`"12.50"`, `"7"`, `"+3"`, `"-3"`, `".5"`, `"5."`, `"1e5"`, `"1E+2"`, `"1e-999"`, `"1e999"`, `"007"`,
		`" 7 "`, `"\t1\n"`, `"\r\n 2 \f"`, `"\u000b1\u000b"`, `"\u0031"`, `" 1e2 "`,
		// strings that are not numbers
		`""`, `" "`, `"abc"`, `"12abc"`, `"0x10"`, `"1e1000"`, `"1 2"`, `"--1"`, `"+-1"`, `"."`, `"e5"`, `"1e"`,
		`"1,5"`, `"NaN"`, `"Infinity"`, `"\u00a01"`, `"１"`, `"1\u00001"`,
		// other JSON values
		`true`, `false`, `null`, `{}`, `{"a":1}`, `[]`, `[1]`,
	}
	for _, v := range values {
		text, ok := warehouse.JNum(json.RawMessage(v))
		var arg *string
		if ok {
			arg = &text
		}
		var same bool
		var sql *string
		err := pool.QueryRow(ctx, `SELECT warehouse.jnum($1::jsonb) IS NOT DISTINCT FROM $2::text::numeric, warehouse.jnum($1::jsonb)::text`,
			v, arg).Scan(&same, &sql)
		if err != nil {
			if strings.Contains(v, `\u0000`) && !ok {
				continue // jsonb refuses NUL; the API never stores it (storableJSON)
			}
			t.Fatalf("%s: %v", v, err)
		}
		if !same {
			got := "NULL"
			if ok {
				got = text
			}
			want := "NULL"
			if sql != nil {
				want = *sql
			}
			t.Errorf("JNum(%s) = %s, warehouse.jnum = %s", v, got, want)
		}
	}
}
