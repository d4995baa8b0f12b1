-- Revocable tokens: every token Cohort mints for a tenant (Bearer access tokens, session tokens)
-- carries the tenant's token generation, and a token of an older generation is refused. `cohort
-- tenants rotate-keys` and `cohort tenants revoke-tokens` bump it. Tokens minted before this
-- migration carry none, which reads as 0: they stay valid until the tenant's first bump.
ALTER TABLE tenants ADD COLUMN token_generation BIGINT NOT NULL DEFAULT 0;

-- A fingerprint of the secret key (COHORT_SECRET_KEY, or the dev key file) the database was set up
-- with: HMAC-SHA256 of a constant under a key derived from it, never the key. A process that
-- starts with another key (a `cohort tenants` run from the wrong directory, which would mint tokens
-- the server refuses and seal tenant secrets nobody can open) is stopped before it writes anything.
-- One row at most.
CREATE TABLE secret_key_fingerprint (
    singleton   BOOLEAN     PRIMARY KEY DEFAULT TRUE CHECK (singleton),
    fingerprint TEXT        NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
