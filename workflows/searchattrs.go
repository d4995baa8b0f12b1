// Package workflows holds Cohort's Temporal workflow functions, their input and result types, task
// queue names and workflow-ID helpers. Workflows only orchestrate: no I/O, no time.Now, no
// randomness, no goroutines (workflowcheck keeps it so). Activities are referenced through nil
// struct pointers of the activities package.
package workflows

import (
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/cohort-dev/cohort/workflows/searchattr"
)

// Custom search attributes every Cohort workflow sets, so operators can find a tenant's, a
// segment's or a connector's runs: temporal workflow list --query 'CohortConnector=12'.
// The embedded server registers them at namespace creation; production clusters need
//
//	temporal operator search-attribute create --name CohortTenant --type Int
//
// (and the same for CohortSegment, CohortConnector), see deploy/runbooks/temporal-setup.md.
const (
	SearchAttrTenant    = searchattr.Tenant
	SearchAttrSegment   = searchattr.Segment
	SearchAttrConnector = searchattr.Connector
)

// SearchAttributeTypes lists the custom search attributes and their types.
func SearchAttributeTypes() map[string]enumspb.IndexedValueType { return searchattr.Types() }

// TenantSearchAttributes are the typed search attributes of a tenant-scoped workflow.
func TenantSearchAttributes(tenantID int64) temporal.SearchAttributes {
	return temporal.NewSearchAttributes(temporal.NewSearchAttributeKeyInt64(SearchAttrTenant).ValueSet(tenantID))
}

// ID builds a workflow ID that always contains the tenant: "<kind>:<tenant>:<parts...>".
func ID(kind string, tenantID int64, parts ...any) string {
	id := fmt.Sprintf("%s:%d", kind, tenantID)
	for _, p := range parts {
		id += fmt.Sprintf(":%v", p)
	}
	return id
}
