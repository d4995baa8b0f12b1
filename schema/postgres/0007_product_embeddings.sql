-- Product embeddings for semantic search (pages): one vector per product, computed by the
-- ProductEmbeddings workflow from the product's embedding text (name + searchable fields, see
-- internal/catalog/embeddings.go), and the durable queue of products whose embedding is due.
--
-- Neither table references tenants: both reference products ON DELETE CASCADE, and products
-- cascade from tenants, so deleting a product or a tenant removes its rows (and the bulk upsert
-- pays one foreign-key check per queued product, not two). tenant_id is always the product's.

CREATE TABLE product_embeddings (
    product_id BIGINT      PRIMARY KEY REFERENCES products (id) ON DELETE CASCADE,
    tenant_id  BIGINT      NOT NULL,
    model      TEXT        NOT NULL, -- the provider's embedding model, e.g. text-embedding-3-small
    dims       INTEGER     NOT NULL CHECK (dims > 0),
    text_hash  BYTEA       NOT NULL CHECK (length(text_hash) = 32), -- sha256 of the embedding text
    -- dims little-endian IEEE 754 float32s, L2-normalised (a zero vector stays zero): read
    -- as bytes and decoded in one pass (catalog.DecodeVector), 4 bytes a dimension on disk and
    -- on the wire.
    vector     BYTEA       NOT NULL CHECK (length(vector) = 4 * dims),
    updated_at TIMESTAMPTZ NOT NULL
);
-- Vectors do not compress: large ones go out of line without pglz trying.
ALTER TABLE product_embeddings ALTER COLUMN vector SET STORAGE EXTERNAL;
-- The search reads every vector of a tenant for one model.
CREATE INDEX product_embeddings_tenant_idx ON product_embeddings (tenant_id, model);

-- The queue: a row per product whose embedding must be (re)considered. Saving a product that is
-- already queued takes a new seq, so a drain that read the older seq deletes nothing it has not
-- seen (its delete is guarded by seq).
CREATE SEQUENCE product_embedding_queue_seq;
CREATE TABLE product_embedding_queue (
    product_id   BIGINT      PRIMARY KEY REFERENCES products (id) ON DELETE CASCADE,
    tenant_id    BIGINT      NOT NULL,
    seq          BIGINT      NOT NULL DEFAULT nextval('product_embedding_queue_seq'),
    -- failed provider calls of this text (invalid request); at catalog.MaxEmbedAttempts the row is
    -- parked: kept, skipped by drains, until the product is saved again.
    attempts     INTEGER     NOT NULL DEFAULT 0,
    last_error   TEXT,
    -- NULL: ready. Else not before then: a drain's claim (lease) or the backoff after a failure.
    available_at TIMESTAMPTZ,
    queued_at    TIMESTAMPTZ NOT NULL
);
ALTER SEQUENCE product_embedding_queue_seq OWNED BY product_embedding_queue.seq;
CREATE INDEX product_embedding_queue_tenant_seq_idx ON product_embedding_queue (tenant_id, seq);

-- Products stored before this migration are due too.
INSERT INTO product_embedding_queue (product_id, tenant_id, queued_at)
SELECT id, tenant_id, now() FROM products;
