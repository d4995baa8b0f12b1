-- Identity: anonymous visitors who become customers keep their history.
--
-- An event names its subject by user_id, anonymous_id or both (at least one). The warehouse keeps
-- both: user_id is the subject the event was sent as (the user id when one was given, otherwise
-- the anonymous id), anonymous_id the anonymous id it carried ('' for none). So every existing
-- reader that groups by user_id still sees one row per subject, and an anonymous visitor is a
-- subject of its own until it is linked.
--
-- identity_links is the tenant's identity graph: an identify that carries both ids, or an alias,
-- links an id (anonymous_id here; for an alias the previous id) to a user. Readers resolve a
-- subject to its canonical user with COALESCE(l.user_id, e.user_id) over a LEFT JOIN on
-- (tenant_id, anonymous_id = e.user_id): events stored before the link, and those still on the
-- bus, count for the user from then on. Rules (internal/identity):
--   - an id links to one user only: the primary key; a second claim is refused and logged in
--     ingestion_errors;
--   - a user holds at most COHORT_IDENTITY_MAX_ANONYMOUS_IDS links (default 100); more are refused,
--     never merged;
--   - links do not chain: a linked id's user is canonical (a link whose user is itself a linked
--     id is refused).

-- Ids compare byte by byte, like every id column (0011_key_collation_c.sql).
ALTER TABLE warehouse.events ADD COLUMN anonymous_id TEXT COLLATE "C" NOT NULL DEFAULT '';

CREATE TABLE identity_links (
    tenant_id    BIGINT      NOT NULL,
    anonymous_id TEXT COLLATE "C" NOT NULL,
    user_id      TEXT COLLATE "C" NOT NULL,
    -- identify or alias
    source       TEXT        NOT NULL,
    linked_at    TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (tenant_id, anonymous_id)
);
CREATE INDEX identity_links_user_idx ON identity_links (tenant_id, user_id);
