package segment_test

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/blob"
	"github.com/cohort-dev/cohort/internal/errs"
	"github.com/cohort-dev/cohort/internal/ident"
	"github.com/cohort-dev/cohort/internal/segment"
	"github.com/cohort-dev/cohort/internal/testenv"
)

func newExportStore(t *testing.T) *blob.Local {
	t.Helper()
	st, err := blob.NewLocal(blob.LocalConfig{Dir: t.TempDir(), BaseURL: "http://127.0.0.1:8080", SigningKey: bytes.Repeat([]byte("k"), blob.MinSigningKeyLen)})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func readBlob(t *testing.T, st blob.Store, key string) []byte {
	t.Helper()
	r, err := st.Open(t.Context(), key)
	if err != nil {
		t.Fatalf("open %s: %v", key, err)
	}
	defer func() { _ = r.Close() }()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCreateExportValidation(t *testing.T) {
	f := newSegFixture(t)
	tenant := f.tenant("acme")
	other := f.tenant("other")
	seg := f.segment(tenant, "rule", "pro", defPro)
	otherSeg := f.segment(other, "rule", "pro", defPro)
	many := make([]string, segment.MaxExportTraits+1)
	for i := range many {
		many[i] = fmt.Sprintf("t%d", i)
	}
	tests := []struct {
		name       string
		segID      int64
		in         segment.ExportInput
		wantFormat string
		wantTraits []string
		wantFields []string
		wantErr    error
	}{
		{name: "default format is parquet", segID: seg.ID, in: segment.ExportInput{}, wantFormat: "parquet", wantTraits: []string{}},
		{name: "csv upper case", segID: seg.ID, in: segment.ExportInput{Format: "CSV"}, wantFormat: "csv", wantTraits: []string{}},
		{name: "jsonl with traits", segID: seg.ID, in: segment.ExportInput{Format: " jsonl ", Traits: []string{"plan", "age"}}, wantFormat: "jsonl", wantTraits: []string{"plan", "age"}},
		{name: "as many traits as allowed", segID: seg.ID, in: segment.ExportInput{Format: "csv", Traits: many[:segment.MaxExportTraits]}, wantFormat: "csv", wantTraits: many[:segment.MaxExportTraits]},
		{name: "unknown format", segID: seg.ID, in: segment.ExportInput{Format: "xml"}, wantFields: []string{"format"}},
		{name: "trait user_id", segID: seg.ID, in: segment.ExportInput{Traits: []string{"user_id"}}, wantFields: []string{"traits[0]"}},
		{name: "trait computed_at", segID: seg.ID, in: segment.ExportInput{Traits: []string{"plan", "computed_at"}}, wantFields: []string{"traits[1]"}},
		{name: "trait score", segID: seg.ID, in: segment.ExportInput{Traits: []string{"score"}}, wantFields: []string{"traits[0]"}},
		{name: "duplicate trait", segID: seg.ID, in: segment.ExportInput{Traits: []string{"plan", "age", "plan"}}, wantFields: []string{"traits[2]"}},
		{name: "empty trait", segID: seg.ID, in: segment.ExportInput{Traits: []string{""}}, wantFields: []string{"traits[0]"}},
		{name: "blank trait", segID: seg.ID, in: segment.ExportInput{Traits: []string{"plan", "  "}}, wantFields: []string{"traits[1]"}},
		{name: "trait not utf-8", segID: seg.ID, in: segment.ExportInput{Traits: []string{"pl\xffan"}}, wantFields: []string{"traits[0]"}},
		{name: "trait too long", segID: seg.ID, in: segment.ExportInput{Traits: []string{strings.Repeat("t", ident.MaxNameLen+1)}}, wantFields: []string{"traits[0]"}},
		{name: "trait with a control character", segID: seg.ID, in: segment.ExportInput{Traits: []string{"a\nb"}}, wantFields: []string{"traits[0]"}},
		{name: "too many traits", segID: seg.ID, in: segment.ExportInput{Traits: many}, wantFields: []string{"traits"}},
		{name: "format and traits wrong", segID: seg.ID, in: segment.ExportInput{Format: "pdf", Traits: []string{"score"}}, wantFields: []string{"format", "traits[0]"}},
		{name: "another tenant's segment", segID: otherSeg.ID, in: segment.ExportInput{}, wantErr: errs.ErrNotFound},
		{name: "missing segment", segID: 999999, in: segment.ExportInput{}, wantErr: errs.ErrNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := f.svc.CreateExport(f.ctx, tenant, tc.segID, tc.in)
			switch {
			case tc.wantFields != nil:
				testenv.WantFieldErrors(t, err, testenv.FieldNames(tc.wantFields...))
				return
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("error = %v, want %v", err, tc.wantErr)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			if e.ID == 0 || e.SegmentID != tc.segID || e.Format != tc.wantFormat || !reflect.DeepEqual(e.Traits, tc.wantTraits) ||
				e.Status != "queued" || !e.CreatedAt.Equal(fixtureStart) || e.RowCount != nil || e.ExpiresAt != nil {
				t.Fatalf("export = %+v", e)
			}
			got, err := f.svc.GetExport(f.ctx, tenant, tc.segID, e.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Format != tc.wantFormat || !reflect.DeepEqual(got.Traits, tc.wantTraits) || got.Status != "queued" {
				t.Fatalf("stored export = %+v", got)
			}
		})
	}
}

// exportWorld is a tenant with a computed segment of three members (u3 without a profile) and
// another tenant with the same user ids.
type exportWorld struct {
	f               *segFixture
	tenant, other   int64
	seg, otherSeg   *segment.Segment
	computedAt      time.Time
	computedAtLater time.Time
}

func newExportWorld(t *testing.T) *exportWorld {
	f := newSegFixture(t)
	w := &exportWorld{f: f, tenant: f.tenant("acme"), other: f.tenant("other")}
	// Events out of user id order; u4 never ordered.
	f.event(w.tenant, "u2", "order_completed", 1, `{}`)
	f.event(w.tenant, "u1", "order_completed", 1, `{}`)
	f.profile(w.tenant, "u1", `{"plan":"pro","age":31,"vip":true,"tags":["a","b"],"secret":"not exported"}`)
	f.profile(w.tenant, "u2", `{"plan":"=1+1","age":null}`)
	f.profile(w.tenant, "u4", `{"plan":"free"}`)
	f.profile(w.other, "u1", `{"plan":"other tenant"}`)
	f.profile(w.other, "u3", `{"plan":"other tenant"}`)
	f.event(w.other, "u1", "order_completed", 1, `{}`)
	w.seg = f.segment(w.tenant, "rule", "buyers", defOrdered)
	w.computedAt = f.clock.Now()
	f.compute(w.tenant, w.seg.ID)
	// u3 enters an hour later: another computed_at.
	f.clock.Advance(time.Hour)
	f.event(w.tenant, "u3", "order_completed", 1, `{}`)
	w.computedAtLater = f.clock.Now()
	f.compute(w.tenant, w.seg.ID)
	w.otherSeg = f.segment(w.other, "rule", "buyers", defOrdered)
	f.compute(w.other, w.otherSeg.ID)
	return w
}

func TestWriteExport(t *testing.T) {
	w := newExportWorld(t)
	f := w.f
	st := newExportStore(t)
	at1 := w.computedAt.UTC().Format("2006-01-02T15:04:05.000Z")
	at3 := w.computedAtLater.UTC().Format("2006-01-02T15:04:05.000Z")
	tests := []struct {
		name   string
		in     segment.ExportInput
		verify func(t *testing.T, data []byte)
	}{
		{
			name: "csv with traits",
			in:   segment.ExportInput{Format: "csv", Traits: []string{"plan", "age", "vip", "tags"}},
			verify: func(t *testing.T, data []byte) {
				recs, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
				if err != nil {
					t.Fatalf("read csv: %v\n%s", err, data)
				}
				want := [][]string{
					{"user_id", "computed_at", "plan", "age", "vip", "tags"},
					{"u1", at1, "pro", "31", "true", `["a","b"]`},
					{"u2", at1, "'=1+1", "", "", ""},
					{"u3", at3, "", "", "", ""},
				}
				if !reflect.DeepEqual(recs, want) {
					t.Fatalf("csv = %q, want %q", recs, want)
				}
			},
		},
		{
			name: "csv without traits",
			in:   segment.ExportInput{Format: "csv"},
			verify: func(t *testing.T, data []byte) {
				want := "user_id,computed_at\nu1," + at1 + "\nu2," + at1 + "\nu3," + at3 + "\n"
				if string(data) != want {
					t.Fatalf("csv = %q, want %q", data, want)
				}
			},
		},
		{
			name: "jsonl with traits",
			in:   segment.ExportInput{Format: "jsonl", Traits: []string{"plan", "age", "missing"}},
			verify: func(t *testing.T, data []byte) {
				want := []map[string]any{
					{"user_id": "u1", "computed_at": at1, "traits": map[string]any{"plan": "pro", "age": float64(31)}},
					{"user_id": "u2", "computed_at": at1, "traits": map[string]any{"plan": "=1+1", "age": nil}},
					{"user_id": "u3", "computed_at": at3, "traits": map[string]any{}},
				}
				got := decodeLines(t, data)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("jsonl = %v, want %v", got, want)
				}
			},
		},
		{
			name: "jsonl without traits",
			in:   segment.ExportInput{Format: "jsonl"},
			verify: func(t *testing.T, data []byte) {
				got := decodeLines(t, data)
				want := []map[string]any{
					{"user_id": "u1", "computed_at": at1},
					{"user_id": "u2", "computed_at": at1},
					{"user_id": "u3", "computed_at": at3},
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("jsonl = %v, want %v", got, want)
				}
			},
		},
		{
			name: "parquet",
			in:   segment.ExportInput{Traits: []string{"plan"}},
			verify: func(t *testing.T, data []byte) {
				if len(data) < 12 || !bytes.HasPrefix(data, []byte("PAR1")) || !bytes.HasSuffix(data, []byte("PAR1")) {
					t.Fatalf("not a parquet file: %d bytes", len(data))
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := f.svc.CreateExport(f.ctx, w.tenant, w.seg.ID, tc.in)
			if err != nil {
				t.Fatal(err)
			}
			var progress []int64
			done, err := f.svc.WriteExport(f.ctx, w.tenant, e.ID, st, func(n int64) { progress = append(progress, n) })
			if err != nil {
				t.Fatal(err)
			}
			now := f.clock.Now()
			if done.Status != "ready" || done.RowCount == nil || *done.RowCount != 3 || done.Error != nil ||
				done.FinishedAt == nil || !done.FinishedAt.Equal(now) || done.ExpiresAt == nil || !done.ExpiresAt.Equal(now.Add(segment.ExportTTL)) {
				t.Fatalf("export after write = %+v", done)
			}
			if len(progress) == 0 || progress[len(progress)-1] != 3 {
				t.Fatalf("progress = %v", progress)
			}
			key := fmt.Sprintf("exports/t%d/segment-%d-export-%d.%s", w.tenant, w.seg.ID, e.ID, done.Format)
			if done.BlobKey == nil || *done.BlobKey != key || segment.ExportKey(done) != key {
				t.Fatalf("blob key = %v, want %s", done.BlobKey, key)
			}
			info, err := st.Stat(f.ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			wantType := map[string]string{"csv": "text/csv; charset=utf-8", "jsonl": "application/x-ndjson", "parquet": "application/vnd.apache.parquet"}[done.Format]
			if info.ContentType != wantType {
				t.Fatalf("content type = %s, want %s", info.ContentType, wantType)
			}
			data := readBlob(t, st, key)
			tc.verify(t, data)

			// Writing a ready export again keeps it.
			f.clock.Advance(time.Minute)
			again, err := f.svc.WriteExport(f.ctx, w.tenant, e.ID, st, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !again.FinishedAt.Equal(*done.FinishedAt) || *again.RowCount != 3 {
				t.Fatalf("second write = %+v", again)
			}
			if !bytes.Equal(readBlob(t, st, key), data) {
				t.Fatal("second write changed the file")
			}
		})
	}

	t.Run("another tenant cannot write it", func(t *testing.T) {
		e, err := f.svc.CreateExport(f.ctx, w.tenant, w.seg.ID, segment.ExportInput{Format: "csv"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.svc.WriteExport(f.ctx, w.other, e.ID, st, nil); !errors.Is(err, errs.ErrNotFound) {
			t.Fatalf("error = %v, want errs.ErrNotFound", err)
		}
		if got, _ := f.svc.GetExport(f.ctx, w.tenant, 0, e.ID); got.Status != "queued" {
			t.Fatalf("status = %s, want queued", got.Status)
		}
	})

	t.Run("fail export", func(t *testing.T) {
		e, err := f.svc.CreateExport(f.ctx, w.tenant, w.seg.ID, segment.ExportInput{Format: "csv"})
		if err != nil {
			t.Fatal(err)
		}
		if err := f.svc.FailExport(f.ctx, w.tenant, e.ID, "bucket unavailable"); err != nil {
			t.Fatal(err)
		}
		got, err := f.svc.GetExport(f.ctx, w.tenant, w.seg.ID, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != "error" || got.Error == nil || *got.Error != "bucket unavailable" || got.FinishedAt == nil || got.Expired(f.clock.Now().Add(48*time.Hour)) {
			t.Fatalf("failed export = %+v", got)
		}
	})
}

func decodeLines(t *testing.T, data []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// An export of more members than one read batch (10,000) lists every member once, in order.
func TestWriteExportManyMembers(t *testing.T) {
	f := newSegFixture(t)
	tenant := f.tenant("acme")
	const n = 10_001
	f.exec(`INSERT INTO profiles (tenant_id, user_id, traits, first_seen_at, last_seen_at)
		SELECT $1, 'u' || lpad(g::text, 5, '0'), jsonb_build_object('member', true, 'n', g), now(), now() FROM generate_series(0, $2 - 1) g`, tenant, n)
	seg := f.segment(tenant, "rule", "everyone", defMember)
	f.compute(tenant, seg.ID)
	st := newExportStore(t)
	e, err := f.svc.CreateExport(f.ctx, tenant, seg.ID, segment.ExportInput{Format: "csv", Traits: []string{"n"}})
	if err != nil {
		t.Fatal(err)
	}
	var progress []int64
	done, err := f.svc.WriteExport(f.ctx, tenant, e.ID, st, func(rows int64) { progress = append(progress, rows) })
	if err != nil {
		t.Fatal(err)
	}
	if *done.RowCount != n || !reflect.DeepEqual(progress, []int64{10_000, n}) {
		t.Fatalf("rows = %d, progress = %v", *done.RowCount, progress)
	}
	recs, err := csv.NewReader(bytes.NewReader(readBlob(t, st, *done.BlobKey))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != n+1 {
		t.Fatalf("%d records, want %d", len(recs), n+1)
	}
	for i, r := range recs[1:] {
		if want := fmt.Sprintf("u%05d", i); r[0] != want || r[2] != fmt.Sprint(i) {
			t.Fatalf("record %d = %v, want %s with n %d", i, r, want, i)
		}
	}
}

// A lookalike's export carries the score column.
func TestWriteExportLookalikeScore(t *testing.T) {
	f := newSegFixture(t)
	tenant := f.tenant("acme")
	_, buyers, _ := lookalikePopulation(f, tenant)
	seedSeg := f.segment(tenant, "rule", "big buyers",
		`{"logic":"AND","conditions":[{"type":"frequency","event_type":"order_completed","operator":"gte","value":12}]}`)
	f.compute(tenant, seedSeg.ID)
	look := f.segment(tenant, "lookalike", "like big buyers", fmt.Sprintf(`{"seed_segment_id":%d,"size":5}`, seedSeg.ID))
	f.compute(tenant, look.ID)
	members := f.scoredMembers(tenant, look.ID)
	st := newExportStore(t)
	e, err := f.svc.CreateExport(f.ctx, tenant, look.ID, segment.ExportInput{Format: "jsonl"})
	if err != nil {
		t.Fatal(err)
	}
	done, err := f.svc.WriteExport(f.ctx, tenant, e.ID, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	lines := decodeLines(t, readBlob(t, st, *done.BlobKey))
	if len(lines) != 5 || len(members) != 5 {
		t.Fatalf("%d lines for %d members", len(lines), len(members))
	}
	isBuyer := map[string]bool{}
	for _, u := range buyers {
		isBuyer[u] = true
	}
	for i, l := range lines {
		if l["user_id"] != members[i].user || l["score"] != *members[i].score || !isBuyer[members[i].user] {
			t.Fatalf("line %d = %v, want member %s with score %v", i, l, members[i].user, *members[i].score)
		}
	}
}

func TestGetExportScoping(t *testing.T) {
	w := newExportWorld(t)
	f := w.f
	e, err := f.svc.CreateExport(f.ctx, w.tenant, w.seg.ID, segment.ExportInput{Format: "csv"})
	if err != nil {
		t.Fatal(err)
	}
	second := f.segment(w.tenant, "rule", "second", defPro)
	tests := []struct {
		name    string
		tenant  int64
		segID   int64
		id      int64
		wantErr error
	}{
		{"own export of the segment", w.tenant, w.seg.ID, e.ID, nil},
		{"own export, any segment", w.tenant, 0, e.ID, nil},
		{"another tenant", w.other, 0, e.ID, errs.ErrNotFound},
		{"another tenant with the segment id", w.other, w.seg.ID, e.ID, errs.ErrNotFound},
		{"wrong segment of the tenant", w.tenant, second.ID, e.ID, errs.ErrNotFound},
		{"another tenant's segment", w.tenant, w.otherSeg.ID, e.ID, errs.ErrNotFound},
		{"missing export", w.tenant, w.seg.ID, 999999, errs.ErrNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := f.svc.GetExport(f.ctx, tc.tenant, tc.segID, tc.id)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || got != nil {
					t.Fatalf("export = %v, error = %v; want %v", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.ID != e.ID || got.SegmentID != w.seg.ID || got.Format != "csv" || got.Traits == nil {
				t.Fatalf("export = %+v", got)
			}
		})
	}
}

func TestExportExpired(t *testing.T) {
	expires := fixtureStart.Add(segment.ExportTTL)
	tests := []struct {
		name    string
		expires *time.Time
		now     time.Time
		want    bool
	}{
		{"not ready", nil, fixtureStart.Add(1000 * time.Hour), false},
		{"fresh", &expires, fixtureStart, false},
		{"a nanosecond before", &expires, expires.Add(-time.Nanosecond), false},
		{"at the expiry", &expires, expires, true},
		{"after", &expires, expires.Add(time.Hour), true},
		{"same instant in another zone", &expires, expires.In(time.FixedZone("x", 5*3600)), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := &segment.Export{ExpiresAt: tc.expires}
			if got := e.Expired(tc.now); got != tc.want {
				t.Fatalf("Expired(%v) = %v, want %v", tc.now, got, tc.want)
			}
		})
	}
	// A written export expires ExportTTL after it finished.
	w := newExportWorld(t)
	e, err := w.f.svc.CreateExport(w.f.ctx, w.tenant, w.seg.ID, segment.ExportInput{Format: "csv"})
	if err != nil {
		t.Fatal(err)
	}
	done, err := w.f.svc.WriteExport(w.f.ctx, w.tenant, e.ID, newExportStore(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	finished := w.f.clock.Now()
	if done.Expired(finished.Add(segment.ExportTTL-time.Second)) || !done.Expired(finished.Add(segment.ExportTTL)) {
		t.Fatalf("written export expires at %v, want %v", done.ExpiresAt, finished.Add(segment.ExportTTL))
	}
}
