# Cloud resources for Cohort on Google Cloud: Pub/Sub (topic, subscription, dead letters),
# BigQuery (dataset + events table from schema/bigquery/events.json), GCS (exports, with
# lifecycle), the service account and its IAM (incl. the Workload Identity binding), Secret
# Manager secrets, Cloud SQL (optional), the GKE Autopilot cluster (optional), and the load
# balancer's static address and managed certificate. deploy/runbooks/deploy-gke.md applies it.
terraform {
  required_version = ">= 1.5"
  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 6.10, < 8.0"
    }
    random = {
      source  = "hashicorp/random"
      version = ">= 3.6"
    }
  }
  # Keep state remote and private (it holds the generated database password):
  #   terraform init -backend-config="bucket=PROJECT_ID-tfstate"
  backend "gcs" {
    prefix = "cohort"
  }
}

provider "google" {
  project = var.project_id
  region  = var.region
}

data "google_project" "this" {}
