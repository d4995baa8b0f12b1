variable "project_id" {
  description = "Google Cloud project that runs Cohort."
  type        = string
}

variable "region" {
  description = "Region of the cluster, Cloud SQL, the bucket and Artifact Registry."
  type        = string
  default     = "us-central1"
}

variable "bigquery_location" {
  description = "BigQuery dataset location (US, EU or a region)."
  type        = string
  default     = "US"
}

variable "domain" {
  description = "Public host name of the API (COHORT_PUBLIC_URL); its DNS A record must point at the cohort-ip address."
  type        = string
}

variable "namespace" {
  description = "Kubernetes namespace of deploy/k8s (base/kustomization.yaml)."
  type        = string
  default     = "cohort"
}

variable "ksa_name" {
  description = "Kubernetes service account of the pods (base/serviceaccount.yaml)."
  type        = string
  default     = "cohort"
}

variable "create_cluster" {
  description = "Create a GKE Autopilot cluster named cohort. false: bring your own (Workload Identity, Gateway API, Secret Manager add-on, Managed Prometheus)."
  type        = bool
  default     = true
}

variable "create_cloud_sql" {
  description = "Create the Cloud SQL for PostgreSQL instance cohort, its database and user, and the cohort-database-url secret version."
  type        = bool
  default     = true
}

variable "cloud_sql_tier" {
  description = "Cloud SQL machine tier."
  type        = string
  default     = "db-custom-2-7680"
}

variable "exports_retention_days" {
  description = "Days after which export files in the bucket are deleted (download links expire long before)."
  type        = number
  default     = 7
}

variable "events_partition_expiration_days" {
  description = "Drop event partitions older than this many days; 0 keeps everything."
  type        = number
  default     = 0
}
