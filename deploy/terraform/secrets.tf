# Secret Manager secrets, mounted into the pods as files by GKE's Secret Manager add-on
# (deploy/k8s/overlays/gke/secretproviderclass.yaml). Terraform creates the secrets and, for the
# database URL, its version; the other values are added by an operator (runbook), so they never
# enter Terraform state.
locals {
  secrets = toset([
    "cohort-database-url",
    "cohort-secret-key",
    "cohort-temporal-api-key",
    "cohort-openai-api-key",
  ])
}

resource "google_secret_manager_secret" "cohort" {
  for_each  = local.secrets
  secret_id = each.value
  replication {
    auto {}
  }
  depends_on = [google_project_service.apis]
}

resource "google_secret_manager_secret_iam_member" "cohort" {
  for_each  = local.secrets
  secret_id = google_secret_manager_secret.cohort[each.value].id
  role      = "roles/secretmanager.secretAccessor"
  member    = local.cohort_sa
}
