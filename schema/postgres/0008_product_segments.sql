-- Product segments: a definition over the tenant's products (sku, name and the product schema's
-- fields), computed by a Temporal workflow into a snapshot of product ids.

CREATE TABLE product_segments (
    id               BIGSERIAL   PRIMARY KEY,
    tenant_id        BIGINT      NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name             TEXT        NOT NULL,
    -- name lower-cased by the service (Unicode, whatever the collation): names are unique per
    -- tenant case-insensitively.
    name_key         TEXT        NOT NULL,
    description      TEXT        NOT NULL DEFAULT '',
    definition       JSONB       NOT NULL,
    -- Bumped by every definition change; computed_version is the version the snapshot holds.
    version          INT         NOT NULL DEFAULT 1,
    status           TEXT        NOT NULL DEFAULT 'draft'
                     CHECK (status IN ('draft', 'queued', 'computing', 'ready', 'error')),
    computed_count   BIGINT      NOT NULL DEFAULT 0,
    computed_version INT,
    last_computed_at TIMESTAMPTZ,
    last_error       TEXT,
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at       TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX product_segments_name_idx ON product_segments (tenant_id, name_key);
CREATE INDEX product_segments_tenant_idx ON product_segments (tenant_id, id);

-- The last computed snapshot: one row per matching product. No foreign key to products: a
-- deleted product drops out of the member pages at once (they join products) and out of this
-- table at the next compute, and product deletes stay cheap.
CREATE TABLE product_segment_members (
    tenant_id  BIGINT NOT NULL,
    segment_id BIGINT NOT NULL REFERENCES product_segments (id) ON DELETE CASCADE,
    product_id BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, segment_id, product_id)
);
