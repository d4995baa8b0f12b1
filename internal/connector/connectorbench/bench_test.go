// Package connectorbench measures activation syncs: 100k entered users pushed by the real
// adapters through the sync engine (Postgres diff, chunking, token buckets) to each loopback
// platform fake, counting the HTTP requests against the minimum the platforms' batch sizes
// allow and checking the fakes saw no rate-limit or contract violation.
//
//	task bench:activations            (COHORT_BENCH_SYNC_USERS resizes; default 100000)
package connectorbench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/cohort-dev/cohort/internal/connector"
	"github.com/cohort-dev/cohort/internal/connector/klaviyo"
	"github.com/cohort-dev/cohort/internal/connector/platform"
	"github.com/cohort-dev/cohort/internal/connector/platformfake"
	"github.com/cohort-dev/cohort/internal/secretbox"
	"github.com/cohort-dev/cohort/internal/store"
	"github.com/cohort-dev/cohort/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const apiKey = "bench-key-0123456789"

func users() int {
	if v, err := strconv.Atoi(os.Getenv("COHORT_BENCH_SYNC_USERS")); err == nil && v > 0 {
		return v
	}
	return 100000
}

type fixture struct {
	db      *store.DB
	svc     *connector.Service
	tenant  int64
	segment int64
}

// setup makes a tenant and a segment of n members, each with an e-mail trait.
func setup(b *testing.B, n int) *fixture {
	ctx := context.Background()
	db := testenv.OpenDB(b)
	key := secretbox.DeriveKey([]byte("bench-master-secret-0123456789abcdef"), "bench")
	box, err := secretbox.New(map[string][]byte{"k": key}, "k")
	if err != nil {
		b.Fatal(err)
	}
	f := &fixture{db: db, svc: connector.NewService(db.Gorm, db.Pool, box, time.Now, connector.Options{AllowHTTP: true})}
	f.tenant = testenv.Tenant(b, db, "bench")
	if err := db.Pool.QueryRow(ctx, `INSERT INTO segments (tenant_id, name, segment_type, status, computed_count)
		VALUES ($1, 'bench', 'rule', 'ready', $2) RETURNING id`, f.tenant, n).Scan(&f.segment); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO segment_members (tenant_id, segment_id, user_id, computed_at)
		SELECT $1, $2, 'u' || lpad(i::text, 7, '0'), now() FROM generate_series(1, $3) i`, f.tenant, f.segment, n); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, `INSERT INTO profiles (tenant_id, user_id, traits, first_seen_at, last_seen_at)
		SELECT $1, 'u' || lpad(i::text, 7, '0'), jsonb_build_object('email', 'u' || i || '@example.com'), now(), now()
		FROM generate_series(1, $2) i`, f.tenant, n); err != nil {
		b.Fatal(err)
	}
	return f
}

// connector creates an active connector of kind with config and returns its adapter.
func (f *fixture) connector(b *testing.B, kind string, cfg map[string]any, p *connector.Platforms) (int64, platform.Platform) {
	ctx := context.Background()
	raw, _ := json.Marshal(cfg)
	c, err := f.svc.Create(ctx, f.tenant, connector.CreateInput{SegmentID: &f.segment, Kind: kind, Name: kind, Config: raw})
	if err != nil {
		b.Fatal(err)
	}
	creds, err := f.svc.Credentials(ctx, f.tenant, c.ID)
	if err != nil {
		b.Fatal(err)
	}
	adapter, err := p.New(creds)
	if err != nil {
		b.Fatal(err)
	}
	return c.ID, adapter
}

// sync runs one full first sync of the connector and returns its counts.
func (f *fixture) sync(b *testing.B, id int64, adapter platform.Platform, iter int) connector.Counts {
	ctx := context.Background()
	run, err := f.svc.BeginSync(ctx, connector.BeginInput{
		TenantID: f.tenant, ConnectorID: id, Trigger: connector.TriggerManual,
		WorkflowID: fmt.Sprintf("bench:%d:%d", id, iter), TemporalRunID: "r",
	})
	if err != nil {
		b.Fatal(err)
	}
	c, err := f.svc.Push(ctx, f.tenant, run.ID, adapter, nil)
	if err != nil {
		b.Fatal(err)
	}
	// The next iteration starts from an empty platform again.
	if _, err := f.db.Pool.Exec(ctx, "DELETE FROM activation_members WHERE connector_id = $1", id); err != nil {
		b.Fatal(err)
	}
	return c
}

type recorder interface {
	RequestCount(method, pathPrefix string) int
	Violations() []string
	Reset()
}

// BenchmarkSync100k is one first sync of every member to each platform; it reports the wall
// time per sync, the requests sent and the minimum the batch sizes allow.
func BenchmarkSync100k(b *testing.B) {
	n := users()
	f := setup(b, n)
	platforms := &connector.Platforms{
		HTTP:     &http.Client{Timeout: time.Minute},
		Limiters: platform.NewLimiters(),
		// Klaviyo's jobs take a moment to process; the first poll comes after half a second.
		Klaviyo: klaviyo.Options{PollInterval: 500 * time.Millisecond},
	}
	kl := platformfake.NewKlaviyo(platformfake.KlaviyoOptions{APIKey: apiKey, JobDelay: 300 * time.Millisecond})
	defer kl.Close()
	kl.CreateList("BENCH1")
	platforms.KlaviyoBaseURL = kl.URL()
	bz := platformfake.NewBraze(platformfake.BrazeOptions{APIKey: apiKey, PerThreeSeconds: 3000})
	defer bz.Close()
	t1 := platformfake.NewTalonOne(platformfake.TalonOneOptions{APIKey: apiKey})
	defer t1.Close()
	t1.CreateAudience(748)

	cases := []struct {
		name    string
		kind    string
		cfg     map[string]any
		fake    recorder
		minimum int
		check   func() int // members the platform holds after the sync
	}{
		{"klaviyo", connector.KindKlaviyo, map[string]any{"list_id": "BENCH1", "api_key": apiKey}, kl, (n + 9999) / 10000,
			func() int { return len(kl.ListMembers("BENCH1")) }},
		{"braze", connector.KindBraze, map[string]any{"rest_endpoint": bz.URL(), "api_key": apiKey}, bz, (n + 74) / 75,
			func() int { return len(bz.UsersWith(connector.DefaultBrazeAttribute(f.segment), true)) }},
		{"talon_one", connector.KindTalonOne, map[string]any{"base_url": t1.URL(), "api_key": apiKey, "audience_id": 748}, t1, (n + 999) / 1000,
			func() int { return len(t1.AudienceMembers(748)) }},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			id, adapter := f.connector(b, tc.kind, tc.cfg, platforms)
			var c connector.Counts
			tc.fake.Reset()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c = f.sync(b, id, adapter, i)
			}
			b.StopTimer()
			if c.Added != int64(n) {
				b.Fatalf("added %d, want %d", c.Added, n)
			}
			if got := tc.check(); got != n {
				b.Fatalf("the platform holds %d members, want %d", got, n)
			}
			if v := tc.fake.Violations(); len(v) > 0 {
				b.Fatalf("%d violations, first: %s", len(v), v[0])
			}
			writes := tc.fake.RequestCount(http.MethodPost, "/") / b.N
			b.ReportMetric(float64(writes), "writes/sync")
			b.ReportMetric(float64(tc.minimum), "min-writes")
			b.ReportMetric(float64(writes)/float64(tc.minimum), "writes/min")
			if tc.kind == connector.KindKlaviyo {
				b.ReportMetric(float64(tc.fake.RequestCount(http.MethodGet, "/api/profile-bulk-import-jobs/"))/float64(b.N), "polls/sync")
			}
			if writes != tc.minimum {
				b.Fatalf("%d write requests per sync, want the minimum %d", writes, tc.minimum)
			}
		})
	}
}
