# A GKE Autopilot cluster: Workload Identity, Dataplane V2 (NetworkPolicy), Managed Prometheus
# and the Gateway API come with Autopilot; the Secret Manager add-on is turned on here. Set
# create_cluster = false to use an existing cluster with those features.
resource "google_container_cluster" "cohort" {
  count            = var.create_cluster ? 1 : 0
  name             = "cohort"
  location         = var.region
  enable_autopilot = true

  release_channel {
    channel = "REGULAR"
  }

  gateway_api_config {
    channel = "CHANNEL_STANDARD"
  }

  secret_manager_config {
    enabled = true
  }

  deletion_protection = true
  depends_on          = [google_project_service.apis]
}
