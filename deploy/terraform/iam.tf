# The Google service account the pods act as (Workload Identity: KSA cohort/cohort), with only
# what Cohort uses.
resource "google_service_account" "cohort" {
  account_id   = "cohort"
  display_name = "Cohort API and worker"
  depends_on   = [google_project_service.apis]
}

locals {
  cohort_sa = "serviceAccount:${google_service_account.cohort.email}"
}

# Workload Identity: the Kubernetes service account namespace/ksa_name may act as it.
resource "google_service_account_iam_member" "workload_identity" {
  service_account_id = google_service_account.cohort.name
  role               = "roles/iam.workloadIdentityUser"
  member             = "serviceAccount:${var.project_id}.svc.id.goog[${var.namespace}/${var.ksa_name}]"
}

# V4 signed URLs for exports without a key file: the service account signs through IAM
# (signBlob) as itself.
resource "google_service_account_iam_member" "sign_self" {
  service_account_id = google_service_account.cohort.name
  role               = "roles/iam.serviceAccountTokenCreator"
  member             = local.cohort_sa
}

# Pub/Sub: the API publishes, the worker pulls; viewer lets the loader read the subscription's
# settings and backlog.
resource "google_pubsub_topic_iam_member" "publisher" {
  topic  = google_pubsub_topic.events.id
  role   = "roles/pubsub.publisher"
  member = local.cohort_sa
}

resource "google_pubsub_subscription_iam_member" "subscriber" {
  subscription = google_pubsub_subscription.loader.id
  role         = "roles/pubsub.subscriber"
  member       = local.cohort_sa
}

resource "google_pubsub_subscription_iam_member" "viewer" {
  subscription = google_pubsub_subscription.loader.id
  role         = "roles/pubsub.viewer"
  member       = local.cohort_sa
}

# BigQuery: write events, run segment queries.
resource "google_bigquery_dataset_iam_member" "editor" {
  dataset_id = google_bigquery_dataset.cohort.dataset_id
  role       = "roles/bigquery.dataEditor"
  member     = local.cohort_sa
}

resource "google_project_iam_member" "bigquery_jobs" {
  project = var.project_id
  role    = "roles/bigquery.jobUser"
  member  = local.cohort_sa
}

# GCS: write and read exports.
resource "google_storage_bucket_iam_member" "exports" {
  bucket = google_storage_bucket.exports.name
  role   = "roles/storage.objectAdmin"
  member = local.cohort_sa
}

# Cloud SQL: the Auth Proxy sidecar connects as this account.
resource "google_project_iam_member" "cloudsql_client" {
  project = var.project_id
  role    = "roles/cloudsql.client"
  member  = local.cohort_sa
}

# Metrics and traces written by the pods (OpenTelemetry to Cloud Trace, when configured).
resource "google_project_iam_member" "metric_writer" {
  project = var.project_id
  role    = "roles/monitoring.metricWriter"
  member  = local.cohort_sa
}

resource "google_project_iam_member" "trace_agent" {
  project = var.project_id
  role    = "roles/cloudtrace.agent"
  member  = local.cohort_sa
}

# The worker's HPA reads the Pub/Sub backlog through the Custom Metrics Stackdriver Adapter,
# which runs as KSA custom-metrics/custom-metrics-stackdriver-adapter.
resource "google_project_iam_member" "metrics_adapter" {
  project = var.project_id
  role    = "roles/monitoring.viewer"
  member  = "principal://iam.googleapis.com/projects/${data.google_project.this.number}/locations/global/workloadIdentityPools/${var.project_id}.svc.id.goog/subject/ns/custom-metrics/sa/custom-metrics-stackdriver-adapter"
}
