-- Activation connectors: a segment's membership pushed to Klaviyo, Braze or Talon.One after every
-- recompute (or on demand), as adds and removes against what the platform was last told.

CREATE TABLE activation_connectors (
    id             BIGSERIAL PRIMARY KEY,
    tenant_id      BIGINT      NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    -- Deleting a segment deletes its connectors (the platform keeps what it was sent).
    segment_id     BIGINT      NOT NULL REFERENCES segments (id) ON DELETE CASCADE,
    kind           TEXT        NOT NULL CHECK (kind IN ('klaviyo', 'braze', 'talon_one')),
    name           TEXT        NOT NULL,
    status         TEXT        NOT NULL DEFAULT 'inactive' CHECK (status IN ('inactive', 'active', 'error')),
    -- Non-secret config fields in clear; secret fields (api_key ...) only in secrets, each sealed
    -- with AES-256-GCM bound to tenant, connector and field (internal/secretbox).
    config         JSONB       NOT NULL DEFAULT '{}',
    secrets        JSONB       NOT NULL DEFAULT '{}',
    last_synced_at TIMESTAMPTZ,
    last_error     TEXT,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX activation_connectors_tenant_idx ON activation_connectors (tenant_id, id);
-- The fan-out after a recompute: the active connectors of a segment.
CREATE INDEX activation_connectors_segment_idx ON activation_connectors (tenant_id, segment_id) WHERE status = 'active';

-- One row per sync (the Temporal workflow activation-sync:<tenant>:<connector>:<run>).
CREATE TABLE activation_sync_runs (
    id             BIGSERIAL PRIMARY KEY,
    tenant_id      BIGINT      NOT NULL,
    connector_id   BIGINT      NOT NULL REFERENCES activation_connectors (id) ON DELETE CASCADE,
    segment_run_id BIGINT,     -- the compute run that triggered it (NULL for manual syncs)
    trigger        TEXT        NOT NULL CHECK (trigger IN ('recompute', 'manual', 'replay')),
    workflow_id    TEXT        NOT NULL,
    temporal_run_id TEXT,      -- the workflow execution that claimed it (a reset makes a new row)
    status         TEXT        NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'running', 'succeeded', 'failed')),
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    started_at     TIMESTAMPTZ,
    finished_at    TIMESTAMPTZ,
    added          BIGINT      NOT NULL DEFAULT 0,
    removed        BIGINT      NOT NULL DEFAULT 0,
    skipped        BIGINT      NOT NULL DEFAULT 0,
    failed         BIGINT      NOT NULL DEFAULT 0,
    error          TEXT
);
CREATE INDEX activation_sync_runs_connector_idx ON activation_sync_runs (tenant_id, connector_id, id DESC);
CREATE INDEX activation_sync_runs_workflow_idx ON activation_sync_runs (workflow_id);

-- What each connector's platform holds: the members it was told about and acknowledged
-- (present). A sync pushes (segment members - present) as adds and (present - segment members)
-- as removes, and updates this set chunk by chunk as the platform acknowledges, so a retried or
-- replayed sync resumes where the last one stopped and never re-sends what was applied. Removed
-- members keep their row (present false) so the platform id learned for them is not lost.
CREATE TABLE activation_members (
    tenant_id    BIGINT      NOT NULL,
    connector_id BIGINT      NOT NULL REFERENCES activation_connectors (id) ON DELETE CASCADE,
    user_id      TEXT        NOT NULL,
    email        TEXT,       -- the e-mail the platform knows the member by (Klaviyo)
    platform_id  TEXT,       -- the platform's own id once learned (Klaviyo profile id)
    present      BOOLEAN     NOT NULL,
    synced_at    TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (connector_id, user_id)
);
