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
    AND r.event_type IN UNNEST(@p8)
    AND r.occurred_at >= @p4
  QUALIFY ROW_NUMBER() OVER (PARTITION BY r.event_id ORDER BY r.received_at) = 1
),
a AS (
  SELECT e.user_id,
    MAX(IF(e.event_type = @p2 AND e.occurred_at >= @p1, e.occurred_at, NULL)) AS a0,
    SUM(IF(e.event_type = @p6 AND e.occurred_at >= @p4, SAFE_CAST(LAX_STRING(e.payload[@p5]) AS BIGNUMERIC), NULL)) AS a1
  FROM e
  GROUP BY e.user_id
)
SELECT a.user_id
FROM a
WHERE (COALESCE(a.a0 >= @p3, FALSE) AND COALESCE(COALESCE(a.a1, 0) > @p7, FALSE))
-- params:
-- @p0 = int64(42)
-- @p1 = time.Time(2026-11-13T12:00:00Z)
-- @p2 = string("page_view")
-- @p3 = time.Time(2026-11-14T12:00:00Z)
-- @p4 = time.Time(2026-10-22T12:00:00Z)
-- @p5 = string("amount")
-- @p6 = string("order_completed")
-- @p7 = float64(0)
-- @p8 = []string{"page_view", "order_completed"}
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
    AND r.event_type IN UNNEST(['page_view', 'order_completed'])
    AND r.occurred_at >= TIMESTAMP '2026-10-22 12:00:00Z'
  QUALIFY ROW_NUMBER() OVER (PARTITION BY r.event_id ORDER BY r.received_at) = 1
),
a AS (
  SELECT e.user_id,
    MAX(IF(e.event_type = 'page_view' AND e.occurred_at >= TIMESTAMP '2026-11-13 12:00:00Z', e.occurred_at, NULL)) AS a0,
    SUM(IF(e.event_type = 'order_completed' AND e.occurred_at >= TIMESTAMP '2026-10-22 12:00:00Z', SAFE_CAST(LAX_STRING(e.payload['amount']) AS BIGNUMERIC), NULL)) AS a1
  FROM e
  GROUP BY e.user_id
)
SELECT a.user_id
FROM a
WHERE (COALESCE(a.a0 >= TIMESTAMP '2026-11-14 12:00:00Z', FALSE) AND COALESCE(COALESCE(a.a1, 0) > 0, FALSE))
