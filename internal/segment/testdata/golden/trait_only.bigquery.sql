WITH l AS (
  SELECT anonymous_id, ARRAY_AGG(user_id ORDER BY linked_at LIMIT 1)[OFFSET(0)] AS user_id
  FROM `proj.analytics.identity_links`
  WHERE tenant_id = @p0
  GROUP BY anonymous_id
),
e AS (
  SELECT r.* REPLACE (COALESCE(l.user_id, r.user_id) AS user_id)
  FROM `proj.analytics.events` r
    LEFT JOIN l ON l.anonymous_id = r.user_id
  WHERE r.tenant_id = @p0
  QUALIFY ROW_NUMBER() OVER (PARTITION BY r.event_id ORDER BY r.received_at) = 1
),
u AS (
  SELECT e.user_id,
    ARRAY_AGG(IF(e.event_type = 'context_identified' AND e.payload[@p1] IS NOT NULL AND JSON_TYPE(e.payload[@p1]) <> 'null', e.payload[@p1], NULL) IGNORE NULLS ORDER BY e.occurred_at DESC LIMIT 1)[SAFE_OFFSET(0)] AS a0,
    ARRAY_AGG(IF(e.event_type = 'context_identified' AND e.payload[@p4] IS NOT NULL AND JSON_TYPE(e.payload[@p4]) <> 'null', e.payload[@p4], NULL) IGNORE NULLS ORDER BY e.occurred_at DESC LIMIT 1)[SAFE_OFFSET(0)] AS a1,
    ARRAY_AGG(IF(e.event_type = 'context_identified' AND e.payload[@p6] IS NOT NULL AND JSON_TYPE(e.payload[@p6]) <> 'null', e.payload[@p6], NULL) IGNORE NULLS ORDER BY e.occurred_at DESC LIMIT 1)[SAFE_OFFSET(0)] AS a2,
    ARRAY_AGG(IF(e.event_type = 'context_identified' AND e.payload[@p9] IS NOT NULL AND JSON_TYPE(e.payload[@p9]) <> 'null', e.payload[@p9], NULL) IGNORE NULLS ORDER BY e.occurred_at DESC LIMIT 1)[SAFE_OFFSET(0)] AS a3,
    ARRAY_AGG(IF(e.event_type = 'context_identified' AND e.payload[@p10] IS NOT NULL AND JSON_TYPE(e.payload[@p10]) <> 'null', e.payload[@p10], NULL) IGNORE NULLS ORDER BY e.occurred_at DESC LIMIT 1)[SAFE_OFFSET(0)] AS a4
  FROM e
  GROUP BY e.user_id
)
SELECT u.user_id
FROM u
WHERE (COALESCE(LAX_STRING(u.a0) = @p2, FALSE) OR COALESCE(LAX_STRING(u.a0) IS DISTINCT FROM @p3, FALSE) OR COALESCE(STRPOS(LOWER(LAX_STRING(u.a1)), LOWER(@p5)) > 0, FALSE) OR COALESCE(STARTS_WITH(LOWER(LAX_STRING(u.a2)), LOWER(@p7)), FALSE) OR COALESCE(LAX_STRING(u.a2) IN UNNEST(@p8), FALSE) OR COALESCE(JSON_TYPE(u.a3) <> 'null', FALSE) OR COALESCE(NOT COALESCE(JSON_TYPE(u.a0) <> 'null', FALSE), FALSE) OR COALESCE(SAFE_CAST(LAX_STRING(u.a4) AS BIGNUMERIC) > @p11, FALSE) OR COALESCE(SAFE_CAST(LAX_STRING(u.a4) AS BIGNUMERIC) < @p12, FALSE) OR COALESCE(LAX_STRING(u.a3) = @p13, FALSE))
-- params:
-- @p0 = int64(42)
-- @p1 = string("plan")
-- @p2 = string("pro")
-- @p3 = string("free")
-- @p4 = string("email")
-- @p5 = string("@example.com")
-- @p6 = string("country")
-- @p7 = string("u")
-- @p8 = []string{"DE", "FR"}
-- @p9 = string("vip")
-- @p10 = string("age")
-- @p11 = float64(50)
-- @p12 = float64(30)
-- @p13 = string("true")
-- display:
WITH l AS (
  SELECT anonymous_id, ARRAY_AGG(user_id ORDER BY linked_at LIMIT 1)[OFFSET(0)] AS user_id
  FROM `proj.analytics.identity_links`
  WHERE tenant_id = 42
  GROUP BY anonymous_id
),
e AS (
  SELECT r.* REPLACE (COALESCE(l.user_id, r.user_id) AS user_id)
  FROM `proj.analytics.events` r
    LEFT JOIN l ON l.anonymous_id = r.user_id
  WHERE r.tenant_id = 42
  QUALIFY ROW_NUMBER() OVER (PARTITION BY r.event_id ORDER BY r.received_at) = 1
),
u AS (
  SELECT e.user_id,
    ARRAY_AGG(IF(e.event_type = 'context_identified' AND e.payload['plan'] IS NOT NULL AND JSON_TYPE(e.payload['plan']) <> 'null', e.payload['plan'], NULL) IGNORE NULLS ORDER BY e.occurred_at DESC LIMIT 1)[SAFE_OFFSET(0)] AS a0,
    ARRAY_AGG(IF(e.event_type = 'context_identified' AND e.payload['email'] IS NOT NULL AND JSON_TYPE(e.payload['email']) <> 'null', e.payload['email'], NULL) IGNORE NULLS ORDER BY e.occurred_at DESC LIMIT 1)[SAFE_OFFSET(0)] AS a1,
    ARRAY_AGG(IF(e.event_type = 'context_identified' AND e.payload['country'] IS NOT NULL AND JSON_TYPE(e.payload['country']) <> 'null', e.payload['country'], NULL) IGNORE NULLS ORDER BY e.occurred_at DESC LIMIT 1)[SAFE_OFFSET(0)] AS a2,
    ARRAY_AGG(IF(e.event_type = 'context_identified' AND e.payload['vip'] IS NOT NULL AND JSON_TYPE(e.payload['vip']) <> 'null', e.payload['vip'], NULL) IGNORE NULLS ORDER BY e.occurred_at DESC LIMIT 1)[SAFE_OFFSET(0)] AS a3,
    ARRAY_AGG(IF(e.event_type = 'context_identified' AND e.payload['age'] IS NOT NULL AND JSON_TYPE(e.payload['age']) <> 'null', e.payload['age'], NULL) IGNORE NULLS ORDER BY e.occurred_at DESC LIMIT 1)[SAFE_OFFSET(0)] AS a4
  FROM e
  GROUP BY e.user_id
)
SELECT u.user_id
FROM u
WHERE (COALESCE(LAX_STRING(u.a0) = 'pro', FALSE) OR COALESCE(LAX_STRING(u.a0) IS DISTINCT FROM 'free', FALSE) OR COALESCE(STRPOS(LOWER(LAX_STRING(u.a1)), LOWER('@example.com')) > 0, FALSE) OR COALESCE(STARTS_WITH(LOWER(LAX_STRING(u.a2)), LOWER('u')), FALSE) OR COALESCE(LAX_STRING(u.a2) IN UNNEST(['DE', 'FR']), FALSE) OR COALESCE(JSON_TYPE(u.a3) <> 'null', FALSE) OR COALESCE(NOT COALESCE(JSON_TYPE(u.a0) <> 'null', FALSE), FALSE) OR COALESCE(SAFE_CAST(LAX_STRING(u.a4) AS BIGNUMERIC) > 50, FALSE) OR COALESCE(SAFE_CAST(LAX_STRING(u.a4) AS BIGNUMERIC) < 30, FALSE) OR COALESCE(LAX_STRING(u.a3) = 'true', FALSE))
