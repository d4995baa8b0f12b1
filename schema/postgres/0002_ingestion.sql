-- Event ingestion: the embedded warehouse, profiles, stats rollups, the error log, dead letters and
-- worker heartbeats.

CREATE SCHEMA IF NOT EXISTS warehouse;

-- Same columns as the BigQuery table (schema/bigquery/events.json).
CREATE TABLE warehouse.events (
    tenant_id   BIGINT      NOT NULL,
    event_id    TEXT        NOT NULL,
    user_id     TEXT        NOT NULL,
    event_type  TEXT        NOT NULL,
    occurred_at TIMESTAMPTZ NOT NULL,
    received_at TIMESTAMPTZ NOT NULL,
    payload     JSONB       NOT NULL DEFAULT '{}',
    -- Idempotent loading: the loader inserts with ON CONFLICT DO NOTHING.
    UNIQUE (tenant_id, event_id)
);
CREATE INDEX events_tenant_type_time_idx ON warehouse.events (tenant_id, event_type, occurred_at);
CREATE INDEX events_tenant_user_idx ON warehouse.events (tenant_id, user_id);

-- With BigQuery as the warehouse, the ledger of stored event ids: the loader inserts here first
-- (ON CONFLICT DO NOTHING) in the transaction that also updates profiles and rollups, so a
-- redelivered message is counted once. (The embedded warehouse dedupes on its own unique key.)
CREATE TABLE warehouse.event_ids (
    tenant_id   BIGINT      NOT NULL,
    event_id    TEXT        NOT NULL,
    received_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (tenant_id, event_id)
);

-- User profiles: traits merged from context_identified payloads, seen times from every event.
CREATE TABLE profiles (
    tenant_id     BIGINT      NOT NULL,
    user_id       TEXT        NOT NULL,
    traits        JSONB       NOT NULL DEFAULT '{}',
    -- Per trait, occurred_at of the context_identified that set it: a trait only changes to a
    -- value set more recently, whatever order the events arrive in.
    trait_times   JSONB       NOT NULL DEFAULT '{}',
    first_seen_at TIMESTAMPTZ NOT NULL,
    last_seen_at  TIMESTAMPTZ NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, user_id)
);

-- Hourly rollups by receipt time, maintained by the loader, so stats never scan raw events.
CREATE TABLE ingestion_hourly (
    tenant_id   BIGINT      NOT NULL,
    bucket      TIMESTAMPTZ NOT NULL,
    event_type  TEXT        NOT NULL,
    event_count BIGINT      NOT NULL,
    PRIMARY KEY (tenant_id, bucket, event_type)
);
-- One HyperLogLog sketch of user ids per tenant and hour (precision 14: ~0.8% standard error).
CREATE TABLE ingestion_hourly_users (
    tenant_id BIGINT      NOT NULL,
    bucket    TIMESTAMPTZ NOT NULL,
    sketch    BYTEA       NOT NULL,
    PRIMARY KEY (tenant_id, bucket)
);

-- What /api/ingestion/errors/ reads: validation failures, webhook signature failures, dead letters.
CREATE TABLE ingestion_errors (
    id         BIGSERIAL PRIMARY KEY,
    tenant_id  BIGINT      NOT NULL,
    ts         TIMESTAMPTZ NOT NULL,
    error_type TEXT        NOT NULL,
    detail     TEXT        NOT NULL
);
CREATE INDEX ingestion_errors_tenant_idx ON ingestion_errors (tenant_id, id DESC);

-- Messages the loader could not process after repeated attempts, kept with the reason.
CREATE TABLE ingestion_dead_letters (
    id          BIGSERIAL PRIMARY KEY,
    tenant_id   BIGINT,
    message_id  TEXT        NOT NULL,
    reason      TEXT        NOT NULL,
    attempts    INT         NOT NULL,
    data        BYTEA       NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Liveness of loaders, for /api/ingestion/health/.
CREATE TABLE worker_heartbeats (
    worker_id    TEXT PRIMARY KEY,
    role         TEXT        NOT NULL,
    last_seen_at TIMESTAMPTZ NOT NULL
);
