package testenv

import "go.temporal.io/api/workflowservice/v1"

func listRequest(query string) *workflowservice.ListWorkflowExecutionsRequest {
	return &workflowservice.ListWorkflowExecutionsRequest{Namespace: "default", Query: query}
}
