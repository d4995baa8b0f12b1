-- The page builder agent's builds: one row per POST /api/ai-pages/pages/{id}/build/, listed at
-- GET /api/ai-pages/pages/{id}/builds/. A row is inserted as 'running' when the build starts and
-- finished with its outcome; the partial unique index lets one build per page run at a time across
-- every API replica. A 'running' row older than the service's lease (a replica died mid-build) is
-- marked failed by the next build of the page.
CREATE TABLE page_builds (
    id                BIGSERIAL   PRIMARY KEY,
    tenant_id         BIGINT      NOT NULL,
    page_id           BIGINT      NOT NULL,
    message           TEXT        NOT NULL,
    -- The operations the agent applied to its working copy, in order.
    operations        JSONB       NOT NULL DEFAULT '[]',
    outcome           TEXT        NOT NULL DEFAULT 'running'
                      CHECK (outcome IN ('running', 'applied', 'failed', 'cancelled', 'no_changes')),
    error             TEXT,
    duration_ms       BIGINT      NOT NULL DEFAULT 0,
    prompt_tokens     INT         NOT NULL DEFAULT 0,
    completion_tokens INT         NOT NULL DEFAULT 0,
    -- The page version the build committed (null unless applied).
    version           INT,
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    FOREIGN KEY (tenant_id, page_id) REFERENCES generated_pages (tenant_id, id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX page_builds_running_key ON page_builds (tenant_id, page_id) WHERE outcome = 'running';
CREATE INDEX page_builds_page_idx ON page_builds (tenant_id, page_id, id DESC);
