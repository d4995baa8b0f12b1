# Exports (CSV/JSON files handed out through V4 signed URLs). Private, uniform access; files are
# deleted after exports_retention_days, and abandoned uploads after a day.
resource "google_storage_bucket" "exports" {
  name                        = "${var.project_id}-cohort-exports"
  location                    = var.region
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = false

  lifecycle_rule {
    condition {
      age = var.exports_retention_days
    }
    action {
      type = "Delete"
    }
  }

  lifecycle_rule {
    condition {
      age = 1
    }
    action {
      type = "AbortIncompleteMultipartUpload"
    }
  }

  depends_on = [google_project_service.apis]
}
