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
    AND r.event_type IN UNNEST(@p11)
  QUALIFY ROW_NUMBER() OVER (PARTITION BY r.event_id ORDER BY r.received_at) = 1
),
a AS (
  SELECT e.user_id,
    SUM(IF(e.event_type = @p3 AND e.occurred_at >= @p1, SAFE_CAST(LAX_STRING(e.payload[@p2]) AS BIGNUMERIC), NULL)) AS a0,
    AVG(IF(e.event_type = @p3 AND e.occurred_at >= @p1 AND e.occurred_at < @p5, SAFE_CAST(LAX_STRING(e.payload[@p2]) AS BIGNUMERIC), NULL)) AS a1,
    MIN(IF(e.event_type = @p3, SAFE_CAST(LAX_STRING(e.payload[@p2]) AS BIGNUMERIC), NULL)) AS a2,
    MAX(IF(e.event_type = @p3 AND e.occurred_at >= @p8, SAFE_CAST(LAX_STRING(e.payload[@p2]) AS BIGNUMERIC), NULL)) AS a3,
    COUNT(IF(e.event_type = @p3, SAFE_CAST(LAX_STRING(e.payload[@p9]) AS BIGNUMERIC), NULL)) AS a4
  FROM e
  GROUP BY e.user_id
)
SELECT a.user_id
FROM a
WHERE (COALESCE(COALESCE(a.a0, 0) > @p4, FALSE) OR COALESCE(a.a1 >= @p6, FALSE) OR COALESCE(a.a2 < @p7, FALSE) OR COALESCE(a.a3 <= @p4, FALSE) OR COALESCE(COALESCE(a.a4, 0) = @p10, FALSE) OR COALESCE(COALESCE(a.a0, 0) <> @p7, FALSE))
-- params:
-- @p0 = int64(42)
-- @p1 = time.Time(2026-10-22T12:00:00Z)
-- @p2 = string("amount")
-- @p3 = string("order_completed")
-- @p4 = float64(100)
-- @p5 = time.Time(2026-11-14T12:00:00Z)
-- @p6 = float64(50.5)
-- @p7 = float64(0)
-- @p8 = time.Time(2026-08-23T12:00:00Z)
-- @p9 = string("qty")
-- @p10 = float64(2)
-- @p11 = []string{"order_completed"}
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
    AND r.event_type IN UNNEST(['order_completed'])
  QUALIFY ROW_NUMBER() OVER (PARTITION BY r.event_id ORDER BY r.received_at) = 1
),
a AS (
  SELECT e.user_id,
    SUM(IF(e.event_type = 'order_completed' AND e.occurred_at >= TIMESTAMP '2026-10-22 12:00:00Z', SAFE_CAST(LAX_STRING(e.payload['amount']) AS BIGNUMERIC), NULL)) AS a0,
    AVG(IF(e.event_type = 'order_completed' AND e.occurred_at >= TIMESTAMP '2026-10-22 12:00:00Z' AND e.occurred_at < TIMESTAMP '2026-11-14 12:00:00Z', SAFE_CAST(LAX_STRING(e.payload['amount']) AS BIGNUMERIC), NULL)) AS a1,
    MIN(IF(e.event_type = 'order_completed', SAFE_CAST(LAX_STRING(e.payload['amount']) AS BIGNUMERIC), NULL)) AS a2,
    MAX(IF(e.event_type = 'order_completed' AND e.occurred_at >= TIMESTAMP '2026-08-23 12:00:00Z', SAFE_CAST(LAX_STRING(e.payload['amount']) AS BIGNUMERIC), NULL)) AS a3,
    COUNT(IF(e.event_type = 'order_completed', SAFE_CAST(LAX_STRING(e.payload['qty']) AS BIGNUMERIC), NULL)) AS a4
  FROM e
  GROUP BY e.user_id
)
SELECT a.user_id
FROM a
WHERE (COALESCE(COALESCE(a.a0, 0) > 100, FALSE) OR COALESCE(a.a1 >= 50.5, FALSE) OR COALESCE(a.a2 < 0, FALSE) OR COALESCE(a.a3 <= 100, FALSE) OR COALESCE(COALESCE(a.a4, 0) = 2, FALSE) OR COALESCE(COALESCE(a.a0, 0) <> 0, FALSE))
