// Package activities holds Cohort's Temporal activities. Each capability has one struct that holds
// its dependencies (store, warehouse, AI provider, platform clients), built in cmd/cohort and
// registered by the worker; each activity method takes one input struct and returns one result
// struct. Workflows reference activities through a nil pointer of the struct
// (var a *activities.Segments) and never import their dependencies. Permanent failures are
// returned as non-retryable application errors with stable type strings.
package activities
