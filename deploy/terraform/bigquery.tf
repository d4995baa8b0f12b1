# The warehouse: schema/bigquery/events.json, partitioned by day on occurred_at, clustered by
# tenant, event type and user (schema/bigquery/README.md).
resource "google_bigquery_dataset" "cohort" {
  dataset_id  = "cohort"
  location    = var.bigquery_location
  description = "Cohort events (written by the event loader)"
  depends_on  = [google_project_service.apis]
}

resource "google_bigquery_table" "events" {
  dataset_id               = google_bigquery_dataset.cohort.dataset_id
  table_id                 = "events"
  description              = "Cohort events (written by the event loader)"
  schema                   = file("${path.module}/../../schema/bigquery/events.json")
  require_partition_filter = true
  clustering               = ["tenant_id", "event_type", "user_id"]
  deletion_protection      = true

  time_partitioning {
    type          = "DAY"
    field         = "occurred_at"
    expiration_ms = var.events_partition_expiration_days > 0 ? var.events_partition_expiration_days * 86400000 : null
  }
}
