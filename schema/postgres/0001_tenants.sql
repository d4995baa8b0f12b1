-- Tenants and their credentials. Every tenant-owned table of later migrations carries tenant_id.

CREATE TABLE tenants (
    id                     BIGSERIAL PRIMARY KEY,
    slug                   TEXT        NOT NULL UNIQUE CHECK (slug ~ '^[a-z0-9][a-z0-9-]{1,62}$'),
    name                   TEXT        NOT NULL,
    -- HMAC secrets must be readable to verify signatures, so they are sealed (AES-256-GCM, secretbox)
    -- rather than hashed.
    webhook_secret_sealed  TEXT        NOT NULL,
    identity_secret_sealed TEXT        NOT NULL,
    require_signed_user_id BOOLEAN     NOT NULL DEFAULT FALSE,
    created_at             TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at             TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- API keys: sk_ (secret, server side) and pk_ (public, browser; exchanged for session tokens).
-- Only a SHA-256 hash of the whole key is stored; key_id is the lookup part that appears in the key
-- itself (sk_<key_id>_<secret>), so a lookup is one index probe and the comparison is constant time.
CREATE TABLE api_keys (
    id           BIGSERIAL PRIMARY KEY,
    tenant_id    BIGINT      NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    kind         TEXT        NOT NULL CHECK (kind IN ('secret', 'public')),
    key_id       TEXT        NOT NULL UNIQUE,
    key_hash     BYTEA       NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at   TIMESTAMPTZ,
    revoked_at   TIMESTAMPTZ
);

CREATE INDEX api_keys_tenant_idx ON api_keys (tenant_id, kind);
