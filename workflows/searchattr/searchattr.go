// Package searchattr names the custom Temporal search attributes of Cohort's workflows. It is a
// leaf package so that servers and test harnesses can register them without importing the
// workflows (and, through them, the domain).
package searchattr

import enumspb "go.temporal.io/api/enums/v1"

// Custom search attributes every Cohort workflow sets, so operators can find a tenant's, a
// segment's or a connector's runs: temporal workflow list --query 'CohortConnector=12'.
const (
	Tenant    = "CohortTenant"
	Segment   = "CohortSegment"
	Connector = "CohortConnector"
)

// Types lists the custom search attributes and their types.
func Types() map[string]enumspb.IndexedValueType {
	return map[string]enumspb.IndexedValueType{
		Tenant:    enumspb.INDEXED_VALUE_TYPE_INT,
		Segment:   enumspb.INDEXED_VALUE_TYPE_INT,
		Connector: enumspb.INDEXED_VALUE_TYPE_INT,
	}
}
