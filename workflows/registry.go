package workflows

// Definition is a workflow function and the name workers register it under
// (worker.RegisterWorkflowWithOptions(d.Func, workflow.RegisterOptions{Name: d.Name})).
type Definition struct {
	Name string
	Func any
}

// All lists every workflow of Cohort, each under its registered name. A workflow added here
// needs a recorded history in testdata (TestEveryWorkflowReplays fails without one), and an
// exported workflow function missing here fails TestAllListsEveryWorkflow.
func All() []Definition {
	return []Definition{
		{ActivationSyncWorkflow, ActivationSync},
		{"CatalogImport", CatalogImport},
		{"ProductEmbeddings", ProductEmbeddings},
		{"ProductSegmentCompute", ProductSegmentCompute},
		{"SegmentCompute", SegmentCompute},
		{"SegmentExport", SegmentExport},
		{"SegmentDraft", SegmentDraft},
		{"PageGenerate", PageGenerate},
		{"PageBulkGenerate", PageBulkGenerate},
		{"PageExport", PageExport},
		{"FeedSync", FeedSync},
	}
}
