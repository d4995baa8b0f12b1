-- Product catalogue (PIM): a typed schema per tenant and products whose fields beyond sku and
-- name live in data (jsonb), with case-insensitive SKU identity.

CREATE TABLE product_schemas (
    tenant_id        BIGINT      PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
    fields           JSONB       NOT NULL DEFAULT '[]',
    default_currency TEXT        NOT NULL DEFAULT 'USD',
    default_locale   TEXT        NOT NULL DEFAULT 'en',
    updated_at       TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE products (
    id         BIGSERIAL   PRIMARY KEY,
    tenant_id  BIGINT      NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    sku        TEXT        NOT NULL,
    name       TEXT        NOT NULL,
    -- sku and name lower-cased by the service (Unicode, whatever the database's collation: a
    -- C-locale lower() folds ASCII only): SKU identity and the q search use these.
    sku_key    TEXT        NOT NULL,
    name_key   TEXT        NOT NULL,
    data       JSONB       NOT NULL DEFAULT '{}',
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
-- SKU identity is case-insensitive: "ab-1" and "AB-1" are one product.
CREATE UNIQUE INDEX products_sku_idx ON products (tenant_id, sku_key);
-- Pages in id order, and the facets' "first 1,000 products".
CREATE INDEX products_tenant_id_idx ON products (tenant_id, id);
-- Field filters (price=10, tags=red) are containment tests: data @> '{"price": 10}'.
CREATE INDEX products_data_idx ON products USING gin (data jsonb_path_ops);

-- q (case-insensitive contains on name) uses a trigram index where pg_trgm is available (it ships
-- with PostgreSQL's contrib and on Cloud SQL); without it the search scans the tenant's products.
DO $$
BEGIN
    CREATE EXTENSION IF NOT EXISTS pg_trgm;
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'pg_trgm is not available (%); product name search will scan', SQLERRM;
END
$$;
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') THEN
        EXECUTE 'CREATE INDEX products_name_trgm_idx ON products USING gin (name_key gin_trgm_ops)';
    END IF;
END
$$;
