# Cloud SQL for PostgreSQL: Cohort's metadata store. The pods reach it through the Cloud SQL Auth
# Proxy sidecar on 127.0.0.1:5432 (IAM-authorised, TLS to the instance), so the instance has no
# authorised networks. Set create_cloud_sql = false to bring your own and write
# cohort-database-url yourself.
resource "google_sql_database_instance" "cohort" {
  count               = var.create_cloud_sql ? 1 : 0
  name                = "cohort"
  database_version    = "POSTGRES_16"
  region              = var.region
  deletion_protection = true

  settings {
    tier              = var.cloud_sql_tier
    availability_type = "REGIONAL"
    disk_autoresize   = true

    backup_configuration {
      enabled                        = true
      point_in_time_recovery_enabled = true
    }

    ip_configuration {
      ipv4_enabled = true
      ssl_mode     = "ENCRYPTED_ONLY"
    }

    database_flags {
      name  = "max_connections"
      value = "400"
    }
  }

  depends_on = [google_project_service.apis]
}

resource "google_sql_database" "cohort" {
  count    = var.create_cloud_sql ? 1 : 0
  name     = "cohort"
  instance = google_sql_database_instance.cohort[0].name
}

resource "random_password" "db" {
  count   = var.create_cloud_sql ? 1 : 0
  length  = 32
  special = false
}

resource "google_sql_user" "cohort" {
  count    = var.create_cloud_sql ? 1 : 0
  name     = "cohort"
  instance = google_sql_database_instance.cohort[0].name
  password = random_password.db[0].result
}

# The proxy listens on 127.0.0.1:5432 inside the pod and encrypts to the instance, so the hop
# from the app to the proxy needs no TLS.
resource "google_secret_manager_secret_version" "database_url" {
  count       = var.create_cloud_sql ? 1 : 0
  secret      = google_secret_manager_secret.cohort["cohort-database-url"].id
  secret_data = "postgres://cohort:${random_password.db[0].result}@127.0.0.1:5432/cohort?sslmode=disable"
}
