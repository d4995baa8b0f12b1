-- CSV imports of the product catalogue: one row per uploaded file. The file itself lives in the
-- blob store under blob_key; the row holds the analysis shown for mapping, the confirmed mapping,
-- the progress counters and the checkpoint a retried import resumes from. Counters and checkpoint
-- are written in the same transaction as the products of each chunk, so a chunk is never counted
-- twice nor lost.
CREATE TABLE import_jobs (
    id             BIGSERIAL   PRIMARY KEY,
    tenant_id      BIGINT      NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    status         TEXT        NOT NULL DEFAULT 'pending'
                   CHECK (status IN ('pending', 'mapping', 'importing', 'done', 'failed')),
    filename       TEXT        NOT NULL DEFAULT '',
    blob_key       TEXT        NOT NULL DEFAULT '',
    size_bytes     BIGINT      NOT NULL DEFAULT 0,
    analysis       JSONB,                        -- csvimport.Analysis, set when status reaches mapping
    mapping        JSONB,                        -- confirmed header -> field name or null
    total_rows     BIGINT,                       -- known once the whole file is read
    processed_rows BIGINT      NOT NULL DEFAULT 0,
    created        BIGINT      NOT NULL DEFAULT 0,
    updated        BIGINT      NOT NULL DEFAULT 0,
    unchanged      BIGINT      NOT NULL DEFAULT 0,
    skipped_rows   BIGINT      NOT NULL DEFAULT 0,
    failed_rows    BIGINT      NOT NULL DEFAULT 0,
    errors         JSONB       NOT NULL DEFAULT '[]', -- the first 100 {row, message}
    error          TEXT        NOT NULL DEFAULT '',   -- why a failed import failed
    checkpoint     JSONB,                        -- where the next chunk starts (byte offset, row, line, group)
    workflow_id    TEXT        NOT NULL DEFAULT '',
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    started_at     TIMESTAMPTZ,
    finished_at    TIMESTAMPTZ
);
CREATE INDEX import_jobs_tenant_idx ON import_jobs (tenant_id, id);
