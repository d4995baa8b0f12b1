-- Bounded AI spend (internal/aispend).
--
-- 1. An optional monthly token budget per tenant (cohort tenants set --ai-budget N; NULL: none).
--    Once the tenant's tokens of the current calendar month (UTC) reach it, endpoints that would
--    spend model tokens refuse with 403 ai_budget_exceeded. The check is made before a build or
--    generation starts, never between its steps.
--
-- 2. ai_usage meters the model calls of every tenant: one row per tenant, hour (UTC), operation
--    and model, added to as the provider reports usage (its usage fields: prompt and completion
--    tokens). Every replica writes the same rows, so the counts and the budget are shared.
--
-- 3. ai_spend_take is the one round trip an endpoint that spends tokens makes before it starts:
--    the budget check, then the per-tenant rate limit, reusing api_rate_take (0013_search.sql)
--    with its own bucket, so every API replica shares one count as they do for search.

ALTER TABLE tenants ADD COLUMN ai_monthly_token_budget BIGINT
    CHECK (ai_monthly_token_budget IS NULL OR ai_monthly_token_budget >= 0);

CREATE TABLE ai_usage (
    tenant_id         BIGINT      NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    hour              TIMESTAMPTZ NOT NULL,
    operation         TEXT        NOT NULL,
    model             TEXT        NOT NULL,
    calls             BIGINT      NOT NULL DEFAULT 0,
    prompt_tokens     BIGINT      NOT NULL DEFAULT 0,
    completion_tokens BIGINT      NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, hour, operation, model)
);

-- The tenant's tokens per calendar month (UTC), written with ai_usage in one statement, so the
-- budget check reads one row however many hours, operations and models the month holds.
CREATE TABLE ai_usage_months (
    tenant_id BIGINT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    month     DATE   NOT NULL,
    tokens    BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, month)
);

-- ai_spend_take returns, for the tenant at p_now (microseconds since the epoch):
--   budget: the monthly token budget (NULL: none); used: the tokens of the month p_month_start;
--   wait: 0 when the request is accepted (and counted in the rate limit), else how many
--   microseconds until the rate limit accepts one. When used >= budget nothing is counted and
--   wait is 0: the caller refuses on the budget.
CREATE FUNCTION ai_spend_take(p_tenant BIGINT, p_bucket TEXT, p_now BIGINT, p_limit INTEGER, p_window BIGINT,
                              p_month_start DATE,
                              OUT budget BIGINT, OUT used BIGINT, OUT wait BIGINT)
LANGUAGE plpgsql AS $$
BEGIN
    SELECT t.ai_monthly_token_budget INTO budget FROM tenants t WHERE t.id = p_tenant;
    used := 0;
    wait := 0;
    IF budget IS NOT NULL THEN
        SELECT COALESCE((SELECT m.tokens FROM ai_usage_months m
                         WHERE m.tenant_id = p_tenant AND m.month = p_month_start::date), 0) INTO used;
        IF used >= budget THEN
            RETURN;
        END IF;
    END IF;
    wait := api_rate_take(p_tenant, p_bucket, p_now, p_limit, p_window);
END
$$;
