-- A tenant's catalogue version: every transaction that writes its products (create, update,
-- delete, bulk upsert, CSV import chunk, schema change) adds one as its last statement, so the
-- version and the products it covers commit together. The product list caches its counts (the
-- costly part of a filtered page) per query and version, in each API process: a cached count is
-- used only while the version a page reads is still the one it was counted at.
CREATE TABLE catalog_versions (
    tenant_id BIGINT PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
    version   BIGINT NOT NULL
);
