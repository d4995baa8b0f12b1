package workflows

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/workflow"

	"github.com/cohort-dev/cohort/activities"
	"github.com/cohort-dev/cohort/internal/connector"
	"github.com/cohort-dev/cohort/internal/segment"
	"github.com/cohort-dev/cohort/internal/store"
	"github.com/cohort-dev/cohort/internal/testenv"
	"github.com/cohort-dev/cohort/workflows/summary"
)

// summaryFixture is a tenant with one subject of every kind, in a fresh database.
type summaryFixture struct {
	db                                                                  *store.DB
	tenant                                                              int64
	slug                                                                string
	segment, connector, prodSeg, job, page, pageExport, feed, segExport int64
}

func newSummaryFixture(t *testing.T) *summaryFixture {
	t.Helper()
	f := &summaryFixture{db: testenv.OpenDB(t)}
	// An id unique on the shared Temporal server (workflow ids hold the tenant).
	f.tenant = 1e12 + time.Now().UnixNano()%1e12
	f.slug = fmt.Sprintf("acme-%d", f.tenant%1e6)
	testenv.Exec(t, f.db, `INSERT INTO tenants (id, slug, name, webhook_secret_sealed, identity_secret_sealed)
		VALUES ($1, $2, 'Acme', 'sealed', 'sealed')`, f.tenant, f.slug)
	id := func(sql string, args ...any) int64 {
		var id int64
		if err := f.db.Pool.QueryRow(context.Background(), sql, args...).Scan(&id); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return id
	}
	f.segment = id(`INSERT INTO segments (tenant_id, name, segment_type) VALUES ($1, 'High value', 'rule') RETURNING id`, f.tenant)
	f.connector = id(`INSERT INTO activation_connectors (tenant_id, segment_id, kind, name) VALUES ($1, $2, 'klaviyo', 'VIP list') RETURNING id`, f.tenant, f.segment)
	f.prodSeg = id(`INSERT INTO product_segments (tenant_id, name, name_key, definition) VALUES ($1, 'Summer dresses', 'summer dresses', '{}') RETURNING id`, f.tenant)
	f.job = id(`INSERT INTO import_jobs (tenant_id, filename) VALUES ($1, 'products.csv') RETURNING id`, f.tenant)
	f.page = id(`INSERT INTO generated_pages (tenant_id, slug, title) VALUES ($1, 'linen-dresses', 'Linen dresses') RETURNING id`, f.tenant)
	f.pageExport = id(`INSERT INTO page_exports (tenant_id, page_id, format, api_base) VALUES ($1, $2, 'zip', 'http://127.0.0.1') RETURNING id`, f.tenant, f.page)
	f.feed = id(`INSERT INTO product_feeds (tenant_id, name, url, format, field_map) VALUES ($1, 'Google Shopping', 'https://shop.example.com/feed.xml', 'xml', '{}') RETURNING id`, f.tenant)
	f.segExport = id(`INSERT INTO segment_exports (tenant_id, segment_id, format) VALUES ($1, $2, 'csv') RETURNING id`, f.tenant, f.segment)
	return f
}

// TestSummaryStoreNames: the store finds every kind's names, scoped by the tenant; a missing
// subject or tenant has no names and is no error.
func TestSummaryStoreNames(t *testing.T) {
	f := newSummaryFixture(t)
	s := &summary.Store{Pool: f.db.Pool}
	other := testenv.Tenant(t, f.db, "other-tenant")
	cases := []struct {
		name   string
		tenant int64
		kind   summary.Kind
		id     int64
		want   summary.Names
	}{
		{"tenant", f.tenant, summary.Tenant, f.tenant, summary.Names{Tenant: f.slug}},
		{"segment", f.tenant, summary.Segment, f.segment, summary.Names{Tenant: f.slug, Name: "High value"}},
		{"segment export", f.tenant, summary.SegmentExport, f.segExport, summary.Names{Tenant: f.slug, Name: "High value", Detail: "csv"}},
		{"connector", f.tenant, summary.Connector, f.connector, summary.Names{Tenant: f.slug, Name: "VIP list", Of: "High value", Detail: "klaviyo"}},
		{"product segment", f.tenant, summary.ProductSegment, f.prodSeg, summary.Names{Tenant: f.slug, Name: "Summer dresses"}},
		{"import job", f.tenant, summary.ImportJob, f.job, summary.Names{Tenant: f.slug, Name: "products.csv"}},
		{"page", f.tenant, summary.Page, f.page, summary.Names{Tenant: f.slug, Name: "Linen dresses"}},
		{"page export", f.tenant, summary.PageExport, f.pageExport, summary.Names{Tenant: f.slug, Name: "Linen dresses", Detail: "zip"}},
		{"feed", f.tenant, summary.Feed, f.feed, summary.Names{Tenant: f.slug, Name: "Google Shopping"}},
		{"missing segment", f.tenant, summary.Segment, f.segment + 1000, summary.Names{Tenant: f.slug}},
		{"another tenant's segment", other, summary.Segment, f.segment, summary.Names{Tenant: "other-tenant"}},
		{"missing tenant", f.tenant + 1, summary.Segment, f.segment, summary.Names{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := s.Names(context.Background(), c.tenant, c.kind, c.id)
			if err != nil || got != c.want {
				t.Errorf("names %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
	if _, err := s.Names(context.Background(), f.tenant, "nonsense", 1); err == nil {
		t.Error("an unknown kind gave no error")
	}
}

// TestSegmentComputeAndSyncSummaries: a segment compute started through Starter carries the
// tenant's slug and the segment's name in its summary, and so do the sync children it starts and
// a manual sync (names from Postgres); every other starter's workflow is summarized by name too.
func TestSegmentComputeAndSyncSummaries(t *testing.T) {
	f := newSummaryFixture(t)
	names := &summary.Store{Pool: f.db.Pool}
	r := newServerRun(t, SegmentCompute)
	r.w.RegisterWorkflowWithOptions(ActivationSync, workflow.RegisterOptions{Name: ActivationSyncWorkflow})
	const runID = 42
	r.act("BeginCompute", func(context.Context, activities.BeginComputeInput) (activities.BeginComputeResult, error) {
		return activities.BeginComputeResult{RunID: runID}, nil
	})
	r.act("Materialize", func(_ context.Context, in activities.MaterializeInput) (segment.RunResult, error) {
		return segment.RunResult{RunID: in.RunID, Version: 1, LatestVersion: 1, Matched: 10}, nil
	})
	r.act("FailCompute", func(context.Context, activities.FailComputeInput) error { return nil })
	r.act("ActivationTargets", func(context.Context, activities.ActivationTargetsInput) (activities.ActivationTargetsResult, error) {
		// What activities.Segments.ActivationTargets answers for the fixture's connector.
		return activities.ActivationTargetsResult{ConnectorIDs: []int64{f.connector},
			Connectors: []connector.Target{{ID: f.connector, Name: "VIP list", Kind: "klaviyo"}}}, nil
	})
	r.act("BeginSync", func(_ context.Context, in activities.BeginSyncInput) (activities.BeginSyncResult, error) {
		return activities.BeginSyncResult{SyncRunID: in.SyncRunID + 1, SkipReason: "connector paused"}, nil
	})
	r.start(t)

	seg := &Starter{Client: r.tc, TaskQueue: r.queue, Names: names}
	id, err := seg.Compute(r.ctx, f.tenant, f.segment)
	if err != nil {
		t.Fatal(err)
	}
	var res SegmentComputeResult
	if err := r.tc.GetWorkflow(r.ctx, id, "").Get(r.ctx, &res); err != nil || res.Runs != 1 {
		t.Fatalf("compute %+v, %v", res, err)
	}
	r.wantSummary(t, id, f.slug+` · compute segment "High value"`,
		fmt.Sprintf(`tenant: %q (id %d)`, f.slug, f.tenant), fmt.Sprintf(`segment: "High value" (id %d)`, f.segment))
	child := ActivationSyncID(f.tenant, f.connector, runID)
	if err := r.tc.GetWorkflow(r.ctx, child, "").Get(r.ctx, nil); err != nil {
		t.Fatalf("sync child: %v", err)
	}
	r.wantSummary(t, child, fmt.Sprintf(`%s · sync connector "VIP list" (klaviyo) of segment "High value" after run %d`, f.slug, runID),
		fmt.Sprintf(`connector: "VIP list" (id %d)`, f.connector), "trigger: recompute, segment run 42")

	sync := &Starter{Client: r.tc, TaskQueue: r.queue, Names: names}
	if err := sync.StartSync(r.ctx, f.tenant, f.segment, f.connector, 77); err != nil {
		t.Fatal(err)
	}
	manual := ManualSyncID(f.tenant, f.connector, 77)
	if err := r.tc.GetWorkflow(r.ctx, manual, "").Get(r.ctx, nil); err != nil {
		t.Fatalf("manual sync: %v", err)
	}
	r.wantSummary(t, manual, f.slug+` · sync connector "VIP list" (klaviyo) of segment "High value", manual`,
		fmt.Sprintf(`connector: "VIP list" (id %d)`, f.connector), "trigger: manual, sync run 77")

	// The other starters, on a queue no worker polls: their workflows are described, then
	// terminated.
	idle := testenv.TaskQueue(t)
	started := []struct {
		name  string
		start func() (string, error)
		want  string
	}{
		{"segment export", func() (string, error) {
			return SegmentExportID(f.tenant, f.segExport), (&Starter{Client: r.tc, TaskQueue: idle, Names: names}).Export(r.ctx, f.tenant, f.segment, f.segExport)
		}, fmt.Sprintf(`%s · export segment "High value" as csv (export %d)`, f.slug, f.segExport)},
		{"catalog import", func() (string, error) {
			return (&Starter{Client: r.tc, TaskQueue: idle, Names: names}).StartImport(r.ctx, f.tenant, f.job)
		}, fmt.Sprintf(`%s · import "products.csv" (job %d)`, f.slug, f.job)},
		{"product embeddings", func() (string, error) {
			return ProductEmbeddingsID(f.tenant), (&Starter{Client: r.tc, TaskQueue: idle, Names: names}).ScheduleEmbeddings(r.ctx, f.tenant)
		}, f.slug + " · embed the queued products"},
		{"product segment compute", func() (string, error) {
			return (&Starter{Client: r.tc, TaskQueue: idle, Names: names}).StartCompute(r.ctx, f.tenant, f.prodSeg)
		}, f.slug + ` · compute product segment "Summer dresses"`},
		{"page generation", func() (string, error) {
			return PageGenerateID(f.tenant, f.page), (&Starter{Client: r.tc, TaskQueue: idle, Names: names}).StartGeneration(r.ctx, f.tenant, f.page)
		}, f.slug + ` · generate page "Linen dresses"`},
		{"bulk page generation", func() (string, error) {
			return PageBulkGenerateID(f.tenant, 3), (&Starter{Client: r.tc, TaskQueue: idle, Names: names}).StartBulk(r.ctx, f.tenant, 3)
		}, f.slug + " · bulk page generation, job 3"},
		{"page export", func() (string, error) {
			return PageExportID(f.tenant, f.pageExport), (&Starter{Client: r.tc, TaskQueue: idle, Names: names}).StartExport(r.ctx, f.tenant, f.pageExport)
		}, fmt.Sprintf(`%s · export page "Linen dresses" as zip (export %d)`, f.slug, f.pageExport)},
		{"feed sync", func() (string, error) {
			return FeedSyncID(f.tenant, f.feed), (&Starter{Client: r.tc, TaskQueue: idle, Names: names}).StartFeedSync(r.ctx, f.tenant, f.feed)
		}, f.slug + ` · sync feed "Google Shopping"`},
	}
	for _, s := range started {
		t.Run(s.name, func(t *testing.T) {
			id, err := s.start()
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = r.tc.TerminateWorkflow(context.Background(), id, "", "test done") }()
			r.wantSummary(t, id, s.want, fmt.Sprintf(`tenant: %q (id %d)`, f.slug, f.tenant))
		})
	}
}

// failingNamer fails every lookup.
type failingNamer struct{}

func (failingNamer) Names(context.Context, int64, summary.Kind, int64) (summary.Names, error) {
	return summary.Names{}, errors.New("database down")
}

// TestSummaryFallbacksAndBounds: without names (no Namer, a failed lookup, a deleted subject) the
// summary names ids; a long or multi-line name stays on one line within the server's bounds.
func TestSummaryFallbacksAndBounds(t *testing.T) {
	for _, n := range []Namer{nil, failingNamer{}, fakeNamer{}} {
		md := segmentComputeMeta(12, 5, lookup(context.Background(), n, 12, summary.Segment, 5))
		if md.Summary != "tenant 12 · compute segment 5" || md.Details != "tenant: id 12\nsegment: id 5" {
			t.Errorf("namer %T: %+v", n, md)
		}
	}
	long := strings.Repeat("é", 300) + "\nsecond line"
	md := manualSyncMeta(1, 2, 3, 4, summary.Names{Tenant: strings.Repeat("a", 63), Name: long, Of: long, Detail: "braze"})
	if len(md.Summary) > summaryMaxBytes || !utf8.ValidString(md.Summary) || strings.Contains(md.Summary, "\n") {
		t.Errorf("summary of %d bytes, valid %v: %q", len(md.Summary), utf8.ValidString(md.Summary), md.Summary)
	}
	if strings.Contains(md.Details, "second line") && !strings.Contains(md.Details, `\nsecond`) {
		t.Errorf("a name's newline reached the details unescaped: %q", md.Details)
	}
	if got := strings.Count(md.Details, "\n"); got != 3 {
		t.Errorf("details have %d line breaks, want 3 (tenant, connector, segment, trigger): %q", got, md.Details)
	}
	// Page children of a bulk job know the tenant's slug from the job's input.
	if md := bulkPageMeta(1, "acme", 7, 12); md.Summary != "acme · generate page 12 for bulk job 7" {
		t.Errorf("bulk page summary %q", md.Summary)
	}
	o := (meta{Summary: "s", Details: "d"}).startOptions("w-1", "q", TenantSearchAttributes(1))
	if o.StaticSummary != "s" || o.StaticDetails != "d" || o.ID != "w-1" || o.TaskQueue != "q" || o.TypedSearchAttributes.Size() != 1 ||
		o.WorkflowIDReusePolicy != enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE || o.WorkflowIDConflictPolicy != enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING {
		t.Errorf("startOptions: %+v", o)
	}
}
