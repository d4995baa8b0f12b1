package store_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cohort-dev/cohort/internal/store"
	"github.com/cohort-dev/cohort/internal/testenv"
	"github.com/cohort-dev/cohort/schema"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func TestLoadMigrations(t *testing.T) {
	fsys := fstest.MapFS{
		"db/0002_items.sql":         {Data: []byte("CREATE TABLE items (id int);")},
		"db/0001_init.sql":          {Data: []byte("CREATE TABLE init (id int);\n")},
		"db/0010_tenth.sql":         {Data: []byte("SELECT 10;")},
		"db/0003_notes.txt":         {Data: []byte("not a migration")},
		"db/README.md":              {Data: []byte("# migrations")},
		"db/nested/0004_nested.sql": {Data: []byte("SELECT 4;")},
		"other/0000_elsewhere.sql":  {Data: []byte("SELECT 0;")},
		"empty/.keep":               {Data: nil},
	}
	tests := []struct {
		name    string
		dir     string
		want    []store.Migration
		wantErr bool
	}{
		{
			name: "sql files of the directory, sorted by name",
			dir:  "db",
			want: []store.Migration{
				{Version: "0001_init", SQL: "CREATE TABLE init (id int);\n", Checksum: sum("CREATE TABLE init (id int);\n")},
				{Version: "0002_items", SQL: "CREATE TABLE items (id int);", Checksum: sum("CREATE TABLE items (id int);")},
				{Version: "0010_tenth", SQL: "SELECT 10;", Checksum: sum("SELECT 10;")},
			},
		},
		{name: "another directory", dir: "other", want: []store.Migration{{Version: "0000_elsewhere", SQL: "SELECT 0;", Checksum: sum("SELECT 0;")}}},
		{name: "directory without migrations", dir: "empty", want: nil},
		{name: "missing directory", dir: "nope", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := store.LoadMigrations(fsys, tt.dir)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("LoadMigrations = %v, want error", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("LoadMigrations: %v", err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d migrations %+v, want %d", len(got), got, len(tt.want))
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("migration %d = %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestLoadMigrationsChecksumFollowsContent(t *testing.T) {
	load := func(content string) store.Migration {
		ms, err := store.LoadMigrations(fstest.MapFS{"m/0001_a.sql": {Data: []byte(content)}}, "m")
		if err != nil || len(ms) != 1 {
			t.Fatalf("LoadMigrations = %v, %v", ms, err)
		}
		return ms[0]
	}
	base := load("CREATE TABLE a (id int);")
	tests := []struct {
		name    string
		content string
		same    bool
	}{
		{name: "identical", content: "CREATE TABLE a (id int);", same: true},
		{name: "trailing newline", content: "CREATE TABLE a (id int);\n"},
		{name: "changed column", content: "CREATE TABLE a (id bigint);"},
		{name: "comment added", content: "-- note\nCREATE TABLE a (id int);"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := load(tt.content)
			if (m.Checksum == base.Checksum) != tt.same {
				t.Fatalf("checksum equal = %v, want %v", m.Checksum == base.Checksum, tt.same)
			}
			if len(m.Checksum) != 64 {
				t.Fatalf("checksum %q is not hex SHA-256", m.Checksum)
			}
		})
	}
}

func TestLoadEmbeddedSchema(t *testing.T) {
	ms, err := store.LoadMigrations(schema.Postgres, schema.PostgresDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 || ms[0].Version != "0001_tenants" {
		t.Fatalf("embedded migrations = %v, want 0001_tenants first", versions(ms))
	}
	if !sort.SliceIsSorted(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version }) {
		t.Fatalf("embedded migrations not sorted: %v", versions(ms))
	}
}

func versions(ms []store.Migration) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Version
	}
	return out
}

// migs builds migrations the way LoadMigrations does, from name/SQL pairs.
func migs(t *testing.T, pairs ...string) []store.Migration {
	t.Helper()
	fsys := fstest.MapFS{}
	for i := 0; i < len(pairs); i += 2 {
		fsys["m/"+pairs[i]+".sql"] = &fstest.MapFile{Data: []byte(pairs[i+1])}
	}
	ms, err := store.LoadMigrations(fsys, "m")
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// schemaPool opens a pool on a fresh database whose search_path is a fresh schema, so
// schema_migrations and the test tables live apart from the real migrations testenv applied.
func schemaPool(t *testing.T) (pool *pgxpool.Pool, dsn, schemaName string) {
	t.Helper()
	dsn = testenv.Database(t)
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "mt_" + hex.EncodeToString(b)
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		t.Fatal(err)
	}
	_ = admin.Close(ctx)
	return openSchemaPool(t, dsn, name), dsn, name
}

func openSchemaPool(t *testing.T, dsn, schemaName string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schemaName
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

type appliedRow struct {
	version, checksum string
}

func appliedRows(t *testing.T, pool *pgxpool.Pool) []appliedRow {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT version, checksum FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (appliedRow, error) {
		var a appliedRow
		err := r.Scan(&a.version, &a.checksum)
		return a, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func tableExists(t *testing.T, pool *pgxpool.Pool, name string) bool {
	t.Helper()
	var ok bool
	if err := pool.QueryRow(context.Background(), `SELECT to_regclass($1) IS NOT NULL`, name).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

func count(t *testing.T, pool *pgxpool.Pool, sql string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestMigrateAppliesOnce(t *testing.T) {
	pool, _, _ := schemaPool(t)
	ctx := context.Background()
	ms := migs(t,
		"0001_items", "CREATE TABLE items (id serial PRIMARY KEY, name text NOT NULL);",
		"0002_seed", "INSERT INTO items (name) VALUES ('a'), ('b');",
	)
	steps := []struct {
		name        string
		migrations  []store.Migration
		wantApplied []string
		wantItems   int
	}{
		{name: "first run applies everything", migrations: ms, wantApplied: []string{"0001_items", "0002_seed"}, wantItems: 2},
		{name: "second run applies nothing", migrations: ms, wantApplied: nil, wantItems: 2},
		{name: "third run still nothing", migrations: ms, wantApplied: nil, wantItems: 2},
		{
			name:        "a new migration is applied alone",
			migrations:  append(slices.Clone(ms), migs(t, "0003_more", "INSERT INTO items (name) VALUES ('c');")...),
			wantApplied: []string{"0003_more"}, wantItems: 3,
		},
		{name: "a subset of already applied ones is fine", migrations: ms[:1], wantApplied: nil, wantItems: 3},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			got, err := store.Migrate(ctx, pool, st.migrations)
			if err != nil {
				t.Fatalf("Migrate: %v", err)
			}
			if len(got) != 0 || len(st.wantApplied) != 0 {
				if !slices.Equal(got, st.wantApplied) {
					t.Fatalf("applied = %v, want %v", got, st.wantApplied)
				}
			}
			if n := count(t, pool, `SELECT count(*) FROM items`); n != st.wantItems {
				t.Fatalf("items = %d, want %d", n, st.wantItems)
			}
		})
	}
	all := append(slices.Clone(ms), migs(t, "0003_more", "INSERT INTO items (name) VALUES ('c');")...)
	rows := appliedRows(t, pool)
	if len(rows) != len(all) {
		t.Fatalf("schema_migrations = %v, want %d rows", rows, len(all))
	}
	for i, m := range all {
		if rows[i].version != m.Version || rows[i].checksum != m.Checksum {
			t.Errorf("schema_migrations[%d] = %+v, want %s %s", i, rows[i], m.Version, m.Checksum)
		}
	}
}

func TestMigrateRefusesEditedMigration(t *testing.T) {
	orig := []string{
		"0001_items", "CREATE TABLE items (id int);",
		"0002_more", "CREATE TABLE more (id int);",
	}
	tests := []struct {
		name        string
		edited      []string // replaces orig
		wantVersion string
	}{
		{
			name:        "first migration's SQL changed",
			edited:      []string{"0001_items", "CREATE TABLE items (id bigint);", "0002_more", "CREATE TABLE more (id int);"},
			wantVersion: "0001_items",
		},
		{
			name:        "second migration gained whitespace",
			edited:      []string{"0001_items", "CREATE TABLE items (id int);", "0002_more", "CREATE TABLE more (id int);\n"},
			wantVersion: "0002_more",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool, _, _ := schemaPool(t)
			ctx := context.Background()
			if _, err := store.Migrate(ctx, pool, migs(t, orig...)); err != nil {
				t.Fatal(err)
			}
			// The edited set also brings a new migration, which must not run past the refusal.
			edited := migs(t, append(slices.Clone(tt.edited), "0003_new", "CREATE TABLE brand_new (id int);")...)
			applied, err := store.Migrate(ctx, pool, edited)
			if err == nil {
				t.Fatalf("Migrate accepted an edited migration (applied %v)", applied)
			}
			if !strings.Contains(err.Error(), tt.wantVersion) {
				t.Fatalf("error %q does not name %s", err, tt.wantVersion)
			}
			if slices.Contains(applied, "0003_new") || tableExists(t, pool, "brand_new") {
				t.Fatalf("a migration after the edited one was applied")
			}
			rows := appliedRows(t, pool)
			if len(rows) != 2 {
				t.Fatalf("schema_migrations = %v, want the 2 original rows", rows)
			}
			orig := migs(t, orig...)
			for i := range rows {
				if rows[i].checksum != orig[i].Checksum {
					t.Fatalf("stored checksum of %s changed", rows[i].version)
				}
			}
			// The original files still migrate cleanly (nothing to do).
			if got, err := store.Migrate(ctx, pool, orig); err != nil || len(got) != 0 {
				t.Fatalf("Migrate(original) = %v, %v", got, err)
			}
		})
	}
}

func TestMigrateFailureRollsBack(t *testing.T) {
	tests := []struct {
		name string
		bad  string
	}{
		{name: "division by zero after DDL", bad: "CREATE TABLE partial (id int); INSERT INTO partial VALUES (1); SELECT 1/0;"},
		{name: "syntax error after DDL", bad: "CREATE TABLE partial (id int); CREATE TABL oops (id int);"},
		{name: "missing table after DDL", bad: "CREATE TABLE partial (id int); INSERT INTO does_not_exist VALUES (1);"},
		{name: "constraint violation", bad: "CREATE TABLE partial (id int PRIMARY KEY); INSERT INTO partial VALUES (1), (1);"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool, _, _ := schemaPool(t)
			ctx := context.Background()
			ms := migs(t,
				"0001_ok", "CREATE TABLE ok (id int);",
				"0002_bad", tt.bad,
				"0003_after", "CREATE TABLE after_bad (id int);",
			)
			applied, err := store.Migrate(ctx, pool, ms)
			if err == nil {
				t.Fatal("Migrate succeeded, want the failing migration's error")
			}
			if !strings.Contains(err.Error(), "0002_bad") {
				t.Fatalf("error %q does not name 0002_bad", err)
			}
			if !slices.Equal(applied, []string{"0001_ok"}) {
				t.Fatalf("applied = %v, want [0001_ok]", applied)
			}
			rows := appliedRows(t, pool)
			if len(rows) != 1 || rows[0].version != "0001_ok" {
				t.Fatalf("schema_migrations = %v, want only 0001_ok", rows)
			}
			if tableExists(t, pool, "partial") {
				t.Fatal("the failing migration left its table behind")
			}
			if tableExists(t, pool, "after_bad") {
				t.Fatal("a migration after the failing one ran")
			}
			if !tableExists(t, pool, "ok") {
				t.Fatal("the migration before the failing one was rolled back too")
			}
			// The lock was released and the fixed migration (never applied, so it may change) runs.
			fixed := migs(t,
				"0001_ok", "CREATE TABLE ok (id int);",
				"0002_bad", "CREATE TABLE partial (id int);",
				"0003_after", "CREATE TABLE after_bad (id int);",
			)
			ctx2, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			applied, err = store.Migrate(ctx2, pool, fixed)
			if err != nil || !slices.Equal(applied, []string{"0002_bad", "0003_after"}) {
				t.Fatalf("Migrate(fixed) = %v, %v; want [0002_bad 0003_after]", applied, err)
			}
		})
	}
}

func TestMigrateConcurrent(t *testing.T) {
	_, dsn, schemaName := schemaPool(t)
	ms := migs(t,
		"0001_hits", "CREATE TABLE hits (version text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());",
		"0002_a", "INSERT INTO hits (version) VALUES ('0002_a'); SELECT pg_sleep(0.05);",
		"0003_b", "INSERT INTO hits (version) VALUES ('0003_b'); SELECT pg_sleep(0.05);",
		"0004_c", "CREATE TABLE c (id int); INSERT INTO hits (version) VALUES ('0004_c'); SELECT pg_sleep(0.05);",
		"0005_d", "INSERT INTO hits (version) VALUES ('0005_d');",
	)
	const replicas = 8
	// Each replica has its own pool, like separate processes starting at once.
	pools := make([]*pgxpool.Pool, replicas)
	for i := range pools {
		pools[i] = openSchemaPool(t, dsn, schemaName)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		mu      sync.Mutex
		applied []string
		errsOut []error
	)
	for i := 0; i < replicas; i++ {
		wg.Add(1)
		go func(p *pgxpool.Pool) {
			defer wg.Done()
			<-start
			got, err := store.Migrate(ctx, p, ms)
			mu.Lock()
			defer mu.Unlock()
			applied = append(applied, got...)
			if err != nil {
				errsOut = append(errsOut, err)
			}
		}(pools[i])
	}
	close(start)
	wg.Wait()
	if len(errsOut) > 0 {
		t.Fatalf("concurrent Migrate errors: %v", errors.Join(errsOut...))
	}
	slices.Sort(applied)
	if want := versions(ms); !slices.Equal(applied, want) {
		t.Fatalf("versions applied across replicas = %v, want each of %v exactly once", applied, want)
	}
	for _, v := range []string{"0002_a", "0003_b", "0004_c", "0005_d"} {
		if n := count(t, pools[0], "SELECT count(*) FROM hits WHERE version = '"+v+"'"); n != 1 {
			t.Errorf("migration %s ran %d times, want 1", v, n)
		}
	}
	if rows := appliedRows(t, pools[0]); len(rows) != len(ms) {
		t.Fatalf("schema_migrations = %v", rows)
	}
	// The advisory lock is released: another run returns at once with nothing to do.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	if got, err := store.Migrate(ctx2, pools[0], ms); err != nil || len(got) != 0 {
		t.Fatalf("Migrate after the race = %v, %v", got, err)
	}
}

func TestMigrateRealSchemaPlusExtra(t *testing.T) {
	dsn := testenv.Database(t) // real migrations already applied
	ctx := context.Background()
	db, err := store.Open(ctx, dsn, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	shipped, err := store.LoadMigrations(schema.Postgres, schema.PostgresDir)
	if err != nil {
		t.Fatal(err)
	}
	extra := migs(t,
		"9990_test_extra", "CREATE TABLE test_extra (tenant_id bigint NOT NULL REFERENCES tenants (id));",
		"9991_test_extra_idx", "CREATE INDEX test_extra_tenant_idx ON test_extra (tenant_id);",
	)
	tests := []struct {
		name string
		ms   []store.Migration
		want []string
	}{
		{name: "real migrations again: nothing to do", ms: shipped},
		{name: "real plus extra: only the extra", ms: append(slices.Clone(shipped), extra...), want: []string{"9990_test_extra", "9991_test_extra_idx"}},
		{name: "real plus extra again: nothing", ms: append(slices.Clone(shipped), extra...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := store.Migrate(ctx, db.Pool, tt.ms)
			if err != nil {
				t.Fatalf("Migrate: %v", err)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("applied = %v, want %v", got, tt.want)
			}
		})
	}
	rows := appliedRows(t, db.Pool)
	if len(rows) != len(shipped)+len(extra) {
		t.Fatalf("schema_migrations has %d rows, want %d", len(rows), len(shipped)+len(extra))
	}
	if !tableExists(t, db.Pool, "test_extra") {
		t.Fatal("extra table missing")
	}
}

func TestMigrateCanceledContext(t *testing.T) {
	pool, _, _ := schemaPool(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := store.Migrate(ctx, pool, migs(t, "0001_a", "CREATE TABLE a (id int);")); err == nil {
		t.Fatal("Migrate with a canceled context succeeded")
	}
	if tableExists(t, pool, "a") {
		t.Fatal("a migration ran under a canceled context")
	}
}

func TestOpen(t *testing.T) {
	dsn := testenv.Database(t)
	ctx := context.Background()
	tests := []struct {
		name    string
		url     string
		wantErr bool
	}{
		{name: "test database", url: dsn},
		{name: "not a URL", url: "::not a url::", wantErr: true},
		{name: "nothing listening", url: "postgres://postgres@127.0.0.1:1/postgres?connect_timeout=2", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, err := store.Open(ctx, tt.url, store.Options{MaxConns: 2})
			if tt.wantErr {
				if err == nil {
					db.Close()
					t.Fatal("Open succeeded, want error")
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer db.Close()
			if err := db.Ping(ctx); err != nil {
				t.Fatalf("Ping: %v", err)
			}
			var n int64
			if err := db.Gorm.WithContext(ctx).Raw(`SELECT count(*) FROM schema_migrations`).Scan(&n).Error; err != nil || n == 0 {
				t.Fatalf("GORM query = %d, %v", n, err)
			}
			if got := db.Pool.Config().MaxConns; got != 2 {
				t.Fatalf("MaxConns = %d, want 2", got)
			}
		})
	}
}
