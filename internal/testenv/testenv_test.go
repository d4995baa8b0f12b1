package testenv

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/cohort-dev/cohort/workflows"
)

func TestMain(m *testing.M) { Main(m) }

func TestDatabaseIsFreshAndMigrated(t *testing.T) {
	a, b := OpenDB(t), OpenDB(t)
	ctx := context.Background()
	var applied int
	if err := a.Pool.QueryRow(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&applied); err != nil {
		t.Fatalf("migrations table missing: %v", err)
	}
	if applied == 0 {
		t.Fatal("no migration applied")
	}
	if _, err := a.Pool.Exec(ctx, `INSERT INTO tenants (slug, name, webhook_secret_sealed, identity_secret_sealed) VALUES ('only-in-a', 'A', 'x', 'x')`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.Pool.QueryRow(ctx, `SELECT count(*) FROM tenants`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("databases are shared: second sees %d tenants", n)
	}
}

func greet(_ context.Context, name string) (string, error) { return "hello " + name, nil }

func greetWorkflow(ctx workflow.Context, name string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	var out string
	err := workflow.ExecuteActivity(ctx, greet, name).Get(ctx, &out)
	return out, err
}

// The shared embedded server runs real workflows end to end and knows Cohort's search attributes.
func TestEmbeddedTemporalRunsWorkflows(t *testing.T) {
	c := Temporal(t)
	tq := TaskQueue(t)
	w := worker.New(c, tq, worker.Options{})
	w.RegisterWorkflow(greetWorkflow)
	w.RegisterActivity(greet)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                    workflows.ID("test-greet", 7, "x"),
		TaskQueue:             tq,
		TypedSearchAttributes: workflows.TenantSearchAttributes(7),
	}, greetWorkflow, "cohort")
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	var got string
	if err := run.Get(ctx, &got); err != nil {
		t.Fatalf("run: %v", err)
	}
	if got != "hello cohort" {
		t.Fatalf("got %q", got)
	}
	if !strings.HasPrefix(run.GetID(), "test-greet:7:") {
		t.Fatalf("workflow id %q does not carry the tenant", run.GetID())
	}
	// Visibility is eventually consistent: poll the search attribute query briefly.
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := c.ListWorkflow(ctx, listRequest("CohortTenant = 7"))
		if err != nil {
			t.Fatalf("list by search attribute: %v", err)
		}
		if len(resp.Executions) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("CohortTenant=7 found %d executions, want 1", len(resp.Executions))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
