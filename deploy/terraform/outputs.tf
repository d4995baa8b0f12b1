output "service_account" {
  description = "Google service account for the iam.gke.io/gcp-service-account annotation."
  value       = google_service_account.cohort.email
}

output "address" {
  description = "Static IP of the load balancer: point var.domain's A record here."
  value       = google_compute_global_address.cohort.address
}

output "cloud_sql_connection_name" {
  description = "Instance connection name for the Auth Proxy (PROJECT_ID:REGION:cohort)."
  value       = var.create_cloud_sql ? google_sql_database_instance.cohort[0].connection_name : null
}

output "image_repository" {
  description = "Artifact Registry path of the cohort image."
  value       = "${var.region}-docker.pkg.dev/${var.project_id}/${google_artifact_registry_repository.cohort.repository_id}/cohort"
}

output "exports_bucket" {
  value = google_storage_bucket.exports.name
}
