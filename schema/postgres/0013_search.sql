-- Semantic search (GET /api/ai-pages/query, internal/search).
--
-- 1. A change log of product_embeddings, so every API replica's in-memory index (search.Embedded)
--    can apply the changes since the last it saw instead of reading every vector again: one row
--    per product whose embedding was ever written or deleted, holding the sequence number of its
--    latest change. The index reads the rows of a tenant with seq above its own and takes the
--    product's current vector from product_embeddings (none: removed).
--
--    The numbers are drawn when the writing transaction commits (a deferred constraint trigger),
--    under a per-tenant transaction lock, so within a tenant they follow commit order: once a
--    reader has seen number n, every later commit of the tenant gets a larger one, and a snapshot
--    holding n holds every change numbered up to n. The lock is the two-key advisory lock
--    (class 1936024946, the tenant), whose key space is separate from the one-key locks
--    (store.LockKey). It is taken as the transaction's last act, when it waits for nothing else
--    it does not already hold, so writers of one tenant queue only for their commits.
--
--    Every committed change notifies channel product_embedding_changes with the tenant id (one
--    notification per transaction and tenant: Postgres folds identical ones).
--
-- 2. Records of deleted embeddings are pruned after a while (search.Embedded.Prune); the newest
--    pruned number per tenant is kept as its floor, and an index that last synced below the floor
--    loads the tenant again in full.
--
-- 3. The rate limit of the search endpoint, shared by every API replica (internal/search
--    RateLimiter): a sliding log of the last accepted requests per tenant and bucket.

CREATE SEQUENCE product_embedding_change_seq;

-- No foreign keys: a record outlives its product (it says the vector is gone) and the tenant
-- (the pruning removes it).
CREATE TABLE product_embedding_changes (
    product_id BIGINT      PRIMARY KEY,
    tenant_id  BIGINT      NOT NULL,
    seq        BIGINT      NOT NULL,
    changed_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX product_embedding_changes_tenant_seq_idx ON product_embedding_changes (tenant_id, seq);

CREATE TABLE product_embedding_change_floors (
    tenant_id  BIGINT PRIMARY KEY,
    pruned_seq BIGINT NOT NULL
);

CREATE FUNCTION product_embedding_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    t BIGINT;
    p BIGINT;
BEGIN
    IF TG_OP = 'DELETE' THEN
        t := OLD.tenant_id;
        p := OLD.product_id;
    ELSE
        t := NEW.tenant_id;
        p := NEW.product_id;
    END IF;
    PERFORM pg_advisory_xact_lock(1936024946, (t % 2147483647)::int);
    INSERT INTO product_embedding_changes (product_id, tenant_id, seq, changed_at)
    VALUES (p, t, nextval('product_embedding_change_seq'), now())
    ON CONFLICT (product_id) DO UPDATE
        SET tenant_id = EXCLUDED.tenant_id, seq = EXCLUDED.seq, changed_at = EXCLUDED.changed_at;
    PERFORM pg_notify('product_embedding_changes', t::text);
    RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER product_embeddings_changed
    AFTER INSERT OR UPDATE OR DELETE ON product_embeddings
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION product_embedding_changed();

-- Unlogged: a counter of the last minute need not survive a crash, and no WAL is written for it.
CREATE UNLOGGED TABLE api_rate_limits (
    tenant_id BIGINT   NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    bucket    TEXT     NOT NULL,
    -- The times (microseconds since the epoch, 0: never) of the last cardinality(ring) accepted
    -- requests; head is the slot of the oldest, the next to be overwritten.
    ring      BIGINT[] NOT NULL,
    head      INTEGER  NOT NULL,
    PRIMARY KEY (tenant_id, bucket)
);

-- api_rate_take accepts a request of the tenant at p_now (microseconds since the epoch) when
-- fewer than p_limit requests were accepted in the p_window microseconds before it, and records
-- it. It returns 0 when accepted, else how many microseconds until the oldest of the last
-- p_limit accepted requests leaves the window. The row lock serialises the replicas.
CREATE FUNCTION api_rate_take(p_tenant BIGINT, p_bucket TEXT, p_now BIGINT, p_limit INTEGER, p_window BIGINT)
RETURNS BIGINT
LANGUAGE plpgsql AS $$
DECLARE
    r BIGINT[];
    h INTEGER;
BEGIN
    SELECT ring, head INTO r, h FROM api_rate_limits WHERE tenant_id = p_tenant AND bucket = p_bucket FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO api_rate_limits (tenant_id, bucket, ring, head)
        VALUES (p_tenant, p_bucket, array_fill(0::bigint, ARRAY[p_limit]), 0)
        ON CONFLICT DO NOTHING;
        SELECT ring, head INTO r, h FROM api_rate_limits WHERE tenant_id = p_tenant AND bucket = p_bucket FOR UPDATE;
    END IF;
    IF cardinality(r) <> p_limit THEN
        -- The limit changed: keep the newest min(old, new) times, oldest first.
        r := (SELECT COALESCE(array_agg(x ORDER BY x), '{}') FROM (
                SELECT x FROM unnest(r) AS x ORDER BY x DESC LIMIT p_limit) newest);
        r := array_fill(0::bigint, ARRAY[p_limit - cardinality(r)]) || r;
        h := 0;
    END IF;
    IF r[h + 1] > p_now - p_window THEN
        RETURN r[h + 1] + p_window - p_now;
    END IF;
    r[h + 1] := p_now;
    UPDATE api_rate_limits SET ring = r, head = (h + 1) % p_limit WHERE tenant_id = p_tenant AND bucket = p_bucket;
    RETURN 0;
END
$$;
