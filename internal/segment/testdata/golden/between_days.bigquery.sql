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
    AND r.event_type IN UNNEST(@p10)
    AND r.occurred_at >= @p7
  QUALIFY ROW_NUMBER() OVER (PARTITION BY r.event_id ORDER BY r.received_at) = 1
),
a AS (
  SELECT e.user_id,
    SUM(IF(e.event_type = @p4 AND e.occurred_at >= @p1 AND e.occurred_at < @p2, SAFE_CAST(LAX_STRING(e.payload[@p3]) AS BIGNUMERIC), NULL)) AS a0,
    SUM(IF(e.event_type = @p4 AND e.occurred_at >= @p6 AND e.occurred_at < @p1, SAFE_CAST(LAX_STRING(e.payload[@p3]) AS BIGNUMERIC), NULL)) AS a1,
    COUNTIF(e.event_type = @p8 AND e.occurred_at >= @p7 AND e.occurred_at < @p6) AS a2
  FROM e
  GROUP BY e.user_id
)
SELECT a.user_id
FROM a
WHERE (COALESCE(COALESCE(a.a0, 0) >= @p5, FALSE) OR COALESCE(COALESCE(a.a1, 0) >= @p5, FALSE) OR COALESCE(COALESCE(a.a2, 0) > @p9, FALSE))
-- params:
-- @p0 = int64(42)
-- @p1 = time.Time(2026-11-14T12:00:00Z)
-- @p2 = time.Time(2026-11-21T12:00:00Z)
-- @p3 = string("amount")
-- @p4 = string("order_completed")
-- @p5 = float64(50)
-- @p6 = time.Time(2026-10-22T12:00:00Z)
-- @p7 = time.Time(2026-08-23T12:00:00Z)
-- @p8 = string("page_view")
-- @p9 = int64(0)
-- @p10 = []string{"order_completed", "page_view"}
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
    AND r.event_type IN UNNEST(['order_completed', 'page_view'])
    AND r.occurred_at >= TIMESTAMP '2026-08-23 12:00:00Z'
  QUALIFY ROW_NUMBER() OVER (PARTITION BY r.event_id ORDER BY r.received_at) = 1
),
a AS (
  SELECT e.user_id,
    SUM(IF(e.event_type = 'order_completed' AND e.occurred_at >= TIMESTAMP '2026-11-14 12:00:00Z' AND e.occurred_at < TIMESTAMP '2026-11-21 12:00:00Z', SAFE_CAST(LAX_STRING(e.payload['amount']) AS BIGNUMERIC), NULL)) AS a0,
    SUM(IF(e.event_type = 'order_completed' AND e.occurred_at >= TIMESTAMP '2026-10-22 12:00:00Z' AND e.occurred_at < TIMESTAMP '2026-11-14 12:00:00Z', SAFE_CAST(LAX_STRING(e.payload['amount']) AS BIGNUMERIC), NULL)) AS a1,
    COUNTIF(e.event_type = 'page_view' AND e.occurred_at >= TIMESTAMP '2026-08-23 12:00:00Z' AND e.occurred_at < TIMESTAMP '2026-10-22 12:00:00Z') AS a2
  FROM e
  GROUP BY e.user_id
)
SELECT a.user_id
FROM a
WHERE (COALESCE(COALESCE(a.a0, 0) >= 50, FALSE) OR COALESCE(COALESCE(a.a1, 0) >= 50, FALSE) OR COALESCE(COALESCE(a.a2, 0) > 0, FALSE))
