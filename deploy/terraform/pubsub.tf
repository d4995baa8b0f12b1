# Ingestion: the API publishes accepted events to cohort-events; the worker's loader pulls
# cohort-events-loader. A message that fails 10 deliveries moves to cohort-events-dead-letter,
# kept on a subscription for inspection and replay (deploy/runbooks/event-bus.md).
resource "google_pubsub_topic" "events" {
  name                       = "cohort-events"
  message_retention_duration = "604800s"
  depends_on                 = [google_project_service.apis]
}

resource "google_pubsub_topic" "dead_letter" {
  name                       = "cohort-events-dead-letter"
  message_retention_duration = "604800s"
  depends_on                 = [google_project_service.apis]
}

resource "google_pubsub_subscription" "loader" {
  name                       = "cohort-events-loader"
  topic                      = google_pubsub_topic.events.id
  ack_deadline_seconds       = 60
  message_retention_duration = "604800s"
  retain_acked_messages      = false
  expiration_policy {
    ttl = "" # never expires
  }
  retry_policy {
    minimum_backoff = "10s"
    maximum_backoff = "600s"
  }
  dead_letter_policy {
    dead_letter_topic     = google_pubsub_topic.dead_letter.id
    max_delivery_attempts = 10
  }
}

resource "google_pubsub_subscription" "dead_letter_hold" {
  name                       = "cohort-events-dead-letter-hold"
  topic                      = google_pubsub_topic.dead_letter.id
  ack_deadline_seconds       = 60
  message_retention_duration = "604800s"
  expiration_policy {
    ttl = ""
  }
}

# Pub/Sub's service agent forwards dead letters: it publishes to the dead-letter topic and
# acknowledges on the source subscription.
locals {
  pubsub_agent = "serviceAccount:service-${data.google_project.this.number}@gcp-sa-pubsub.iam.gserviceaccount.com"
}

resource "google_pubsub_topic_iam_member" "dead_letter_publisher" {
  topic  = google_pubsub_topic.dead_letter.id
  role   = "roles/pubsub.publisher"
  member = local.pubsub_agent
}

resource "google_pubsub_subscription_iam_member" "dead_letter_subscriber" {
  subscription = google_pubsub_subscription.loader.id
  role         = "roles/pubsub.subscriber"
  member       = local.pubsub_agent
}
