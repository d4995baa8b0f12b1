-- Segments: records, definition versions, computed membership (with the entered/exited diff of
-- every run, kept for the activation sync), the membership cache version, exports.

-- A payload or trait value as a number: JSON numbers and numeric strings ("12.50", which
-- storefronts send), anything else NULL, never an error. Inlined by the planner.
CREATE FUNCTION warehouse.jnum(j jsonb) RETURNS numeric
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE jsonb_typeof(j)
        WHEN 'number' THEN j::numeric
        WHEN 'string' THEN CASE WHEN (j #>> '{}') ~ '^\s*[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]{1,3})?\s*$'
                                THEN (j #>> '{}')::numeric END
    END
$$;

CREATE TABLE segments (
    id                  BIGSERIAL PRIMARY KEY,
    tenant_id           BIGINT      NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name                TEXT        NOT NULL,
    segment_type        TEXT        NOT NULL CHECK (segment_type IN ('rule', 'ai', 'lookalike')),
    description         TEXT        NOT NULL DEFAULT '',
    definition          JSONB,
    version             INT         NOT NULL DEFAULT 0,
    status              TEXT        NOT NULL DEFAULT 'draft'
                        CHECK (status IN ('draft', 'queued', 'computing', 'ready', 'error')),
    computed_count      BIGINT      NOT NULL DEFAULT 0,
    computed_version    INT,
    last_computed_at    TIMESTAMPTZ,
    last_error          TEXT,
    refresh_every_secs  INT,
    created_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at          TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX segments_tenant_idx ON segments (tenant_id, id);

-- Every definition change, numbered from 1 per segment.
CREATE TABLE segment_versions (
    tenant_id                 BIGINT      NOT NULL,
    segment_id                BIGINT      NOT NULL REFERENCES segments (id) ON DELETE CASCADE,
    version                   INT         NOT NULL,
    definition                JSONB       NOT NULL,
    created_at                TIMESTAMPTZ NOT NULL DEFAULT now(),
    computed_count_at_version BIGINT,
    PRIMARY KEY (segment_id, version)
);

-- Current members. computed_at is when the run that brought the user in finished; score is the
-- lookalike percentile. No foreign key: loads are bulk and a deleted segment's rows are deleted
-- with it in one statement.
CREATE TABLE segment_members (
    tenant_id   BIGINT           NOT NULL,
    segment_id  BIGINT           NOT NULL,
    user_id     TEXT             NOT NULL,
    computed_at TIMESTAMPTZ      NOT NULL,
    score       DOUBLE PRECISION,
    PRIMARY KEY (tenant_id, segment_id, user_id)
);
-- GET /api/segments/membership/?user_id=
CREATE INDEX segment_members_user_idx ON segment_members (tenant_id, user_id);

-- One row per compute run: what the Temporal UI shows as a workflow, in the database.
CREATE TABLE segment_runs (
    id           BIGSERIAL PRIMARY KEY,
    tenant_id    BIGINT      NOT NULL,
    segment_id   BIGINT      NOT NULL REFERENCES segments (id) ON DELETE CASCADE,
    version      INT         NOT NULL,
    workflow_id  TEXT        NOT NULL,
    started_at   TIMESTAMPTZ NOT NULL,
    finished_at  TIMESTAMPTZ,
    status       TEXT        NOT NULL CHECK (status IN ('running', 'ready', 'error')),
    matched      BIGINT,
    entered      BIGINT,
    exited       BIGINT,
    -- The segment had no members before: every member entered, and no change rows were written
    -- (the diff is the members whose computed_at is finished_at).
    initial      BOOLEAN     NOT NULL DEFAULT FALSE,
    error        TEXT
);
CREATE INDEX segment_runs_segment_idx ON segment_runs (tenant_id, segment_id, id DESC);

-- The diff of a run: users who entered (true) or exited (false), read by the activation sync.
CREATE TABLE segment_member_changes (
    run_id     BIGINT  NOT NULL REFERENCES segment_runs (id) ON DELETE CASCADE,
    tenant_id  BIGINT  NOT NULL,
    segment_id BIGINT  NOT NULL,
    user_id    TEXT    NOT NULL,
    entered    BOOLEAN NOT NULL,
    PRIMARY KEY (run_id, user_id)
);

-- Bumped by every finished run; API replicas drop their cached memberships of the tenant when it
-- moves (LISTEN cohort_membership, with a poll as a safety net).
CREATE TABLE segment_cache_versions (
    tenant_id BIGINT PRIMARY KEY,
    version   BIGINT NOT NULL
);

CREATE TABLE segment_exports (
    id          BIGSERIAL PRIMARY KEY,
    tenant_id   BIGINT      NOT NULL,
    segment_id  BIGINT      NOT NULL REFERENCES segments (id) ON DELETE CASCADE,
    format      TEXT        NOT NULL CHECK (format IN ('parquet', 'csv', 'jsonl')),
    traits      JSONB       NOT NULL DEFAULT '[]',
    status      TEXT        NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'running', 'ready', 'error')),
    row_count   BIGINT,
    blob_key    TEXT,
    error       TEXT,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    finished_at TIMESTAMPTZ,
    expires_at  TIMESTAMPTZ
);
CREATE INDEX segment_exports_tenant_idx ON segment_exports (tenant_id, id);

-- Per-user rollups of the embedded warehouse for segment conditions without a time window,
-- maintained by the loader in the transaction that stores the events (so exact under
-- redelivery): compute reads one row per user and event type instead of every event.
CREATE TABLE warehouse.user_event_stats (
    tenant_id  BIGINT      NOT NULL,
    event_type TEXT        NOT NULL,
    user_id    TEXT        NOT NULL,
    events     BIGINT      NOT NULL,
    first_at   TIMESTAMPTZ NOT NULL,
    last_at    TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (tenant_id, event_type, user_id)
);
-- Every top-level numeric payload property (as warehouse.jnum reads it) per user and event type.
CREATE TABLE warehouse.user_property_stats (
    tenant_id  BIGINT  NOT NULL,
    event_type TEXT    NOT NULL,
    property   TEXT    NOT NULL,
    user_id    TEXT    NOT NULL,
    n          BIGINT  NOT NULL,
    total      NUMERIC NOT NULL,
    min        NUMERIC NOT NULL,
    max        NUMERIC NOT NULL,
    PRIMARY KEY (tenant_id, event_type, property, user_id)
);
-- Rebuilds a tenant's rollups from its events (the backfill below; also an operator's repair).
CREATE FUNCTION warehouse.rebuild_user_stats(p_tenant BIGINT) RETURNS VOID LANGUAGE sql AS $$
    DELETE FROM warehouse.user_event_stats WHERE tenant_id = p_tenant;
    DELETE FROM warehouse.user_property_stats WHERE tenant_id = p_tenant;
    INSERT INTO warehouse.user_event_stats (tenant_id, event_type, user_id, events, first_at, last_at)
    SELECT tenant_id, event_type, user_id, count(*), min(occurred_at), max(occurred_at)
    FROM warehouse.events WHERE tenant_id = p_tenant GROUP BY tenant_id, event_type, user_id;
    INSERT INTO warehouse.user_property_stats (tenant_id, event_type, property, user_id, n, total, min, max)
    SELECT e.tenant_id, e.event_type, kv.key, e.user_id, count(*), sum(warehouse.jnum(kv.value)),
           min(warehouse.jnum(kv.value)), max(warehouse.jnum(kv.value))
    FROM warehouse.events e, jsonb_each(e.payload) kv
    WHERE e.tenant_id = p_tenant AND jsonb_typeof(e.payload) = 'object' AND length(kv.key) <= 128
      AND warehouse.jnum(kv.value) IS NOT NULL
    GROUP BY e.tenant_id, e.event_type, kv.key, e.user_id;
$$;
-- Events loaded before this migration.
SELECT warehouse.rebuild_user_stats(id) FROM tenants;

-- Nothing reads events by user any more (profiles and the rollups above answer per-user
-- questions); the index only slowed every load.
DROP INDEX warehouse.events_tenant_user_idx;
