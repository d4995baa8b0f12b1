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
    SUM(IF(e.event_type = @p2, SAFE_CAST(LAX_STRING(e.payload[@p1]) AS BIGNUMERIC), NULL)) AS a0,
    ARRAY_AGG(IF(e.event_type = 'context_identified' AND e.payload[@p4] IS NOT NULL AND JSON_TYPE(e.payload[@p4]) <> 'null', e.payload[@p4], NULL) IGNORE NULLS ORDER BY e.occurred_at DESC LIMIT 1)[SAFE_OFFSET(0)] AS a1,
    ARRAY_AGG(IF(e.event_type = 'context_identified' AND e.payload[@p6] IS NOT NULL AND JSON_TYPE(e.payload[@p6]) <> 'null', e.payload[@p6], NULL) IGNORE NULLS ORDER BY e.occurred_at DESC LIMIT 1)[SAFE_OFFSET(0)] AS a2,
    COUNTIF(e.event_type = @p9 AND e.occurred_at >= @p8) AS a3,
    COUNTIF(e.event_type = @p9 AND e.occurred_at >= @p11) AS a4,
    LOGICAL_OR(IF(e.event_type = @p9, COALESCE(STARTS_WITH(LOWER(LAX_STRING(e.payload[@p13])), LOWER(@p14)), FALSE), NULL)) AS a5
  FROM e
  GROUP BY e.user_id
)
SELECT u.user_id
FROM u
WHERE ((COALESCE(COALESCE(u.a0, 0) >= @p3, FALSE) AND (COALESCE(LAX_STRING(u.a1) = @p5, FALSE) OR COALESCE(LAX_STRING(u.a2) = @p7, FALSE) OR NOT (COALESCE(COALESCE(u.a3, 0) > @p10, FALSE)))) OR (COALESCE(COALESCE(u.a4, 0) >= @p12, FALSE) AND NOT COALESCE(u.a5, FALSE)))
-- params:
-- @p0 = int64(42)
-- @p1 = string("amount")
-- @p2 = string("order_completed")
-- @p3 = float64(100)
-- @p4 = string("plan")
-- @p5 = string("pro")
-- @p6 = string("vip")
-- @p7 = string("true")
-- @p8 = time.Time(2026-10-22T12:00:00Z)
-- @p9 = string("page_view")
-- @p10 = int64(0)
-- @p11 = time.Time(2026-11-14T12:00:00Z)
-- @p12 = int64(2)
-- @p13 = string("path")
-- @p14 = string("/pricing")
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
    SUM(IF(e.event_type = 'order_completed', SAFE_CAST(LAX_STRING(e.payload['amount']) AS BIGNUMERIC), NULL)) AS a0,
    ARRAY_AGG(IF(e.event_type = 'context_identified' AND e.payload['plan'] IS NOT NULL AND JSON_TYPE(e.payload['plan']) <> 'null', e.payload['plan'], NULL) IGNORE NULLS ORDER BY e.occurred_at DESC LIMIT 1)[SAFE_OFFSET(0)] AS a1,
    ARRAY_AGG(IF(e.event_type = 'context_identified' AND e.payload['vip'] IS NOT NULL AND JSON_TYPE(e.payload['vip']) <> 'null', e.payload['vip'], NULL) IGNORE NULLS ORDER BY e.occurred_at DESC LIMIT 1)[SAFE_OFFSET(0)] AS a2,
    COUNTIF(e.event_type = 'page_view' AND e.occurred_at >= TIMESTAMP '2026-10-22 12:00:00Z') AS a3,
    COUNTIF(e.event_type = 'page_view' AND e.occurred_at >= TIMESTAMP '2026-11-14 12:00:00Z') AS a4,
    LOGICAL_OR(IF(e.event_type = 'page_view', COALESCE(STARTS_WITH(LOWER(LAX_STRING(e.payload['path'])), LOWER('/pricing')), FALSE), NULL)) AS a5
  FROM e
  GROUP BY e.user_id
)
SELECT u.user_id
FROM u
WHERE ((COALESCE(COALESCE(u.a0, 0) >= 100, FALSE) AND (COALESCE(LAX_STRING(u.a1) = 'pro', FALSE) OR COALESCE(LAX_STRING(u.a2) = 'true', FALSE) OR NOT (COALESCE(COALESCE(u.a3, 0) > 0, FALSE)))) OR (COALESCE(COALESCE(u.a4, 0) >= 2, FALSE) AND NOT COALESCE(u.a5, FALSE)))
