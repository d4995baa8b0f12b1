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
    AVG(IF(e.event_type = @p2, SAFE_CAST(LAX_STRING(e.payload[@p1]) AS BIGNUMERIC), NULL)) AS a0,
    MAX(IF(e.event_type = @p5 AND e.occurred_at >= @p4, e.occurred_at, NULL)) AS a1
  FROM e
  GROUP BY e.user_id
)
SELECT u.user_id
FROM u
WHERE NOT (COALESCE(u.a0 > @p3, FALSE) OR COALESCE(u.a1 > @p6, FALSE))
-- params:
-- @p0 = int64(42)
-- @p1 = string("amount")
-- @p2 = string("order_completed")
-- @p3 = float64(50)
-- @p4 = time.Time(2026-11-13T12:00:00Z)
-- @p5 = string("page_view")
-- @p6 = time.Time(2026-11-14T12:00:00Z)
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
    AVG(IF(e.event_type = 'order_completed', SAFE_CAST(LAX_STRING(e.payload['amount']) AS BIGNUMERIC), NULL)) AS a0,
    MAX(IF(e.event_type = 'page_view' AND e.occurred_at >= TIMESTAMP '2026-11-13 12:00:00Z', e.occurred_at, NULL)) AS a1
  FROM e
  GROUP BY e.user_id
)
SELECT u.user_id
FROM u
WHERE NOT (COALESCE(u.a0 > 50, FALSE) OR COALESCE(u.a1 > TIMESTAMP '2026-11-14 12:00:00Z', FALSE))
