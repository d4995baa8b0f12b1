package workflows

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/cohort-dev/cohort/internal/connector"
	"github.com/cohort-dev/cohort/workflows/summary"
)

// Readable summaries: every workflow Cohort starts carries Temporal's user metadata, a one-line
// StaticSummary ("acme · compute segment \"High value\"") and StaticDetails (the same subjects
// with their ids), shown in the Temporal UI's workflow list and by `temporal workflow describe`,
// so an operator can tell a tenant's runs apart without decoding workflow ids. The starters look
// the names up when they start a workflow (Namer); a start never fails for a name: without a
// Namer, or when the lookup fails, the summary names ids instead. The names are those of the
// start (a later rename does not change a running workflow's summary). Child workflows get a
// summary from what their parent knows (SegmentComputeInput.TenantSlug and SegmentName,
// PageBulkGenerateInput.TenantSlug).

// Namer finds the names a workflow's summary shows (summary.Store in production).
type Namer interface {
	Names(ctx context.Context, tenantID int64, kind summary.Kind, id int64) (summary.Names, error)
}

// NamesFrom is the Namer of production: the names in Postgres (summary.Store).
func NamesFrom(pool *pgxpool.Pool) Namer { return &summary.Store{Pool: pool} }

// Bounds of the user metadata: the server refuses a summary payload above 400 bytes by default
// (limit.userMetadataSummarySize); names are clipped so a summary stays one readable line.
const (
	summaryMaxBytes  = 200
	summaryNameRunes = 48
	detailsNameRunes = 200
	summarySeparator = " · "
)

// meta is a workflow start's user metadata.
type meta struct {
	Summary string
	Details string
}

// startOptions are the options of every start from the API: the workflow id, the task queue,
// the search attributes and this summary. A run of the same id that is still open is joined
// (USE_EXISTING); a closed one does not stop a new start (ALLOW_DUPLICATE: ids restart after a
// database restore while Temporal keeps its history).
func (m meta) startOptions(id, taskQueue string, attrs temporal.SearchAttributes) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                taskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		TypedSearchAttributes:    attrs,
		StaticSummary:            m.Summary,
		StaticDetails:            m.Details,
	}
}

// lookup returns the names of a subject, or none when there is no Namer or the lookup fails
// (the start goes on with ids; the names are only for people).
func lookup(ctx context.Context, n Namer, tenantID int64, kind summary.Kind, id int64) summary.Names {
	if n == nil {
		return summary.Names{}
	}
	names, err := n.Names(ctx, tenantID, kind, id)
	if err != nil {
		return summary.Names{}
	}
	return names
}

// subject is one line of the details: what it is, its id and its name ("" unknown).
type subject struct {
	noun string
	id   int64
	name string
}

// label is a subject in the summary: `segment "High value"`, or `segment 5` without its name.
func (s subject) label() string {
	if s.name == "" {
		return fmt.Sprintf("%s %d", s.noun, s.id)
	}
	return s.noun + " " + quote(s.name, summaryNameRunes)
}

// line is the subject's line of the details: `segment: "High value" (id 5)`.
func (s subject) line() string {
	if s.name == "" {
		return fmt.Sprintf("%s: id %d", s.noun, s.id)
	}
	return fmt.Sprintf("%s: %s (id %d)", s.noun, quote(s.name, detailsNameRunes), s.id)
}

// tenantLabel is the tenant in a summary: its slug, or its id when unknown.
func tenantLabel(tenantID int64, slug string) string {
	if slug == "" {
		return fmt.Sprintf("tenant %d", tenantID)
	}
	return slug
}

// describe builds the metadata: the summary is the tenant and what (a sentence naming the
// subjects), the details list the tenant and each subject with its id, then the extra lines.
func describe(tenantID int64, slug, what string, subjects []subject, extra ...string) meta {
	lines := []string{subject{noun: "tenant", id: tenantID, name: slug}.line()}
	for _, s := range subjects {
		lines = append(lines, s.line())
	}
	lines = append(lines, extra...)
	return meta{
		Summary: clipBytes(tenantLabel(tenantID, slug)+summarySeparator+what, summaryMaxBytes),
		Details: strings.Join(lines, "\n"),
	}
}

// quote quotes a name on one line (control characters escaped), clipped to max runes.
func quote(name string, max int) string {
	if utf8.RuneCountInString(name) > max {
		name = string([]rune(name)[:max-1]) + "…"
	}
	return fmt.Sprintf("%q", name)
}

// clipBytes cuts s to at most max bytes at a rune boundary.
func clipBytes(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// segmentComputeMeta is the summary of a segment's compute (requested or scheduled).
func segmentComputeMeta(tenantID, segmentID int64, n summary.Names) meta {
	seg := subject{"segment", segmentID, n.Name}
	return describe(tenantID, n.Tenant, "compute "+seg.label(), []subject{seg})
}

// segmentExportMeta is the summary of a segment export.
func segmentExportMeta(tenantID, segmentID, exportID int64, n summary.Names) meta {
	seg := subject{"segment", segmentID, n.Name}
	what := "export " + seg.label()
	var extra []string
	if n.Detail != "" {
		what += " as " + n.Detail
		extra = append(extra, "format: "+n.Detail)
	}
	return describe(tenantID, n.Tenant, fmt.Sprintf("%s (export %d)", what, exportID), []subject{seg, {"export", exportID, ""}}, extra...)
}

// segmentDraftMeta is the summary of an AI segment's drafting.
func segmentDraftMeta(tenantID, segmentID int64, n summary.Names) meta {
	seg := subject{"segment", segmentID, n.Name}
	return describe(tenantID, n.Tenant, "draft "+seg.label(), []subject{seg})
}

// manualSyncMeta is the summary of a sync started on demand (POST /sync/).
func manualSyncMeta(tenantID, segmentID, connectorID, syncRunID int64, n summary.Names) meta {
	conn := subject{"connector", connectorID, n.Name}
	seg := subject{"segment", segmentID, n.Of}
	what := "sync " + conn.label()
	if n.Detail != "" {
		what += " (" + n.Detail + ")"
	}
	return describe(tenantID, n.Tenant, what+" of "+seg.label()+", manual", []subject{conn, seg},
		fmt.Sprintf("trigger: manual, sync run %d", syncRunID))
}

// recomputeSyncMeta is the summary of a sync child started by a segment compute's run: the parent
// knows the tenant's slug and the segment's name, and the fan-out activity the connector's name
// and kind (target; empty in histories recorded before it did: ids then).
func recomputeSyncMeta(in SegmentComputeInput, connectorID int64, target connector.Target, runID int64) meta {
	conn := subject{"connector", connectorID, target.Name}
	seg := subject{"segment", in.SegmentID, in.SegmentName}
	what := "sync " + conn.label()
	if target.Kind != "" {
		what += " (" + target.Kind + ")"
	}
	return describe(in.TenantID, in.TenantSlug, fmt.Sprintf("%s of %s after run %d", what, seg.label(), runID),
		[]subject{conn, seg}, fmt.Sprintf("trigger: recompute, segment run %d", runID))
}

// catalogImportMeta is the summary of a CSV import.
func catalogImportMeta(tenantID, jobID int64, n summary.Names) meta {
	what := fmt.Sprintf("import job %d", jobID)
	if n.Name != "" {
		what = fmt.Sprintf("import %s (job %d)", quote(n.Name, summaryNameRunes), jobID)
	}
	return describe(tenantID, n.Tenant, what, []subject{{"import job", jobID, n.Name}})
}

// productEmbeddingsMeta is the summary of a tenant's embedding workflow.
func productEmbeddingsMeta(tenantID int64, n summary.Names) meta {
	return describe(tenantID, n.Tenant, "embed the queued products", nil)
}

// productSegmentMeta is the summary of a product segment's compute.
func productSegmentMeta(tenantID, segmentID int64, n summary.Names) meta {
	seg := subject{"product segment", segmentID, n.Name}
	return describe(tenantID, n.Tenant, "compute "+seg.label(), []subject{seg})
}

// pageGenerateMeta is the summary of a page's generation (requested on its own).
func pageGenerateMeta(tenantID, pageID int64, n summary.Names) meta {
	p := subject{"page", pageID, n.Name}
	return describe(tenantID, n.Tenant, "generate "+p.label(), []subject{p})
}

// bulkPageMeta is the summary of a page generation started by a bulk job (the job knows the
// tenant's slug, not the page's title).
func bulkPageMeta(tenantID int64, slug string, jobID, pageID int64) meta {
	p := subject{"page", pageID, ""}
	return describe(tenantID, slug, fmt.Sprintf("generate %s for bulk job %d", p.label(), jobID), []subject{p, {"bulk job", jobID, ""}})
}

// pageBulkMeta is the summary of a bulk page generation job.
func pageBulkMeta(tenantID, jobID int64, n summary.Names) meta {
	return describe(tenantID, n.Tenant, fmt.Sprintf("bulk page generation, job %d", jobID), []subject{{"bulk job", jobID, ""}})
}

// pageExportMeta is the summary of a page export.
func pageExportMeta(tenantID, exportID int64, n summary.Names) meta {
	what := fmt.Sprintf("export %d", exportID)
	var extra []string
	if n.Name != "" {
		what = "export page " + quote(n.Name, summaryNameRunes)
		extra = append(extra, "page: "+quote(n.Name, detailsNameRunes))
	}
	if n.Detail != "" {
		what += " as " + n.Detail
		extra = append(extra, "format: "+n.Detail)
	}
	if n.Name != "" {
		what += fmt.Sprintf(" (export %d)", exportID)
	}
	return describe(tenantID, n.Tenant, what, []subject{{"export", exportID, ""}}, extra...)
}

// feedSyncMeta is the summary of a feed's sync.
func feedSyncMeta(tenantID, feedID int64, n summary.Names) meta {
	f := subject{"feed", feedID, n.Name}
	return describe(tenantID, n.Tenant, "sync "+f.label(), []subject{f})
}
