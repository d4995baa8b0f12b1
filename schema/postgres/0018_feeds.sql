-- External product feeds: a URL the catalogue is synced from (Google Merchant Center XML, RSS 2.0
-- or Atom with the g: namespace, or a JSON document), how its fields map onto the product schema,
-- and the outcome of its last sync.
CREATE TABLE product_feeds (
    id             BIGSERIAL   PRIMARY KEY,
    tenant_id      BIGINT      NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name           TEXT        NOT NULL,
    url            TEXT        NOT NULL,
    format         TEXT        NOT NULL CHECK (format IN ('json', 'xml')),
    -- source field (JSON dotted path or XML element name) -> sku, name or a product schema field
    field_map      JSONB       NOT NULL,
    -- idle (never synced), queued, syncing, synced, error
    status         TEXT        NOT NULL DEFAULT 'idle' CHECK (status IN ('idle', 'queued', 'syncing', 'synced', 'error')),
    last_error     TEXT,
    last_synced_at TIMESTAMPTZ,
    -- The last finished sync: {"total", "created", "updated", "unchanged", "failed", "failed_items": [...]}.
    last_sync      JSONB,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- Lists by tenant in id order.
    UNIQUE (tenant_id, id)
);
