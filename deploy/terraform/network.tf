# The public entry of deploy/k8s/overlays/gke/gateway.yaml: a global static address (NamedAddress
# cohort-ip) and a Google-managed certificate for var.domain in the certificate map cohort
# (annotation networking.gke.io/certmap). The certificate is issued once var.domain's A record
# points at the address (load balancer authorisation).
resource "google_compute_global_address" "cohort" {
  name       = "cohort-ip"
  depends_on = [google_project_service.apis]
}

resource "google_certificate_manager_certificate" "cohort" {
  name  = "cohort"
  scope = "DEFAULT"
  managed {
    domains = [var.domain]
  }
  depends_on = [google_project_service.apis]
}

resource "google_certificate_manager_certificate_map" "cohort" {
  name       = "cohort"
  depends_on = [google_project_service.apis]
}

resource "google_certificate_manager_certificate_map_entry" "cohort" {
  name         = "cohort"
  map          = google_certificate_manager_certificate_map.cohort.name
  hostname     = var.domain
  certificates = [google_certificate_manager_certificate.cohort.id]
}
