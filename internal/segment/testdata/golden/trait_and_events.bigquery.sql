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
    AVG(IF(e.event_type = @p6 AND e.occurred_at >= @p3 AND e.occurred_at < @p4, SAFE_CAST(LAX_STRING(e.payload[@p5]) AS BIGNUMERIC), NULL)) AS a1
  FROM e
  GROUP BY e.user_id
)
SELECT u.user_id
FROM u
WHERE (COALESCE(LAX_STRING(u.a0) IN UNNEST(@p2), FALSE) AND COALESCE(u.a1 > @p7, FALSE) AND COALESCE(LAX_STRING(u.a0) IS DISTINCT FROM @p8, FALSE))
-- params:
-- @p0 = int64(42)
-- @p1 = string("country")
-- @p2 = []string{"US", "DE"}
-- @p3 = time.Time(2026-09-22T12:00:00Z)
-- @p4 = time.Time(2026-11-21T12:00:00Z)
-- @p5 = string("amount")
-- @p6 = string("order_completed")
-- @p7 = float64(20)
-- @p8 = string("FR")
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
    ARRAY_AGG(IF(e.event_type = 'context_identified' AND e.payload['country'] IS NOT NULL AND JSON_TYPE(e.payload['country']) <> 'null', e.payload['country'], NULL) IGNORE NULLS ORDER BY e.occurred_at DESC LIMIT 1)[SAFE_OFFSET(0)] AS a0,
    AVG(IF(e.event_type = 'order_completed' AND e.occurred_at >= TIMESTAMP '2026-09-22 12:00:00Z' AND e.occurred_at < TIMESTAMP '2026-11-21 12:00:00Z', SAFE_CAST(LAX_STRING(e.payload['amount']) AS BIGNUMERIC), NULL)) AS a1
  FROM e
  GROUP BY e.user_id
)
SELECT u.user_id
FROM u
WHERE (COALESCE(LAX_STRING(u.a0) IN UNNEST(['US', 'DE']), FALSE) AND COALESCE(u.a1 > 20, FALSE) AND COALESCE(LAX_STRING(u.a0) IS DISTINCT FROM 'FR', FALSE))
