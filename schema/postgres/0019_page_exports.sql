-- Page exports (POST/GET /api/ai-pages/pages/{id}/export/): one row per requested export. A row is
-- inserted as 'queued', its workflow marks it 'building' and then 'ready' (blob_key names the file
-- in the blob store, downloadable through signed links until expires_at) or 'error'.
CREATE TABLE page_exports (
    id          BIGSERIAL   PRIMARY KEY,
    tenant_id   BIGINT      NOT NULL,
    page_id     BIGINT      NOT NULL,
    format      TEXT        NOT NULL CHECK (format IN ('tsx', 'html', 'json', 'zip')),
    status      TEXT        NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'building', 'ready', 'error')),
    -- The API origin the tracking snippet of the export calls.
    api_base    TEXT        NOT NULL,
    blob_key    TEXT,
    size_bytes  BIGINT,
    error       TEXT,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    finished_at TIMESTAMPTZ,
    expires_at  TIMESTAMPTZ,
    FOREIGN KEY (tenant_id, page_id) REFERENCES generated_pages (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX page_exports_page_idx ON page_exports (tenant_id, page_id, id DESC);

-- The public (pk_) key the tracking snippets of a tenant's exports carry. Keys are otherwise kept
-- only as hashes (api_keys); a pk_ key is public by design (it only opens a browser session), so
-- the export key is kept in plain here, beside its api_keys row, which revokes it as usual.
CREATE TABLE page_export_keys (
    tenant_id  BIGINT      PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
    key_id     TEXT        NOT NULL,
    public_key TEXT        NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
