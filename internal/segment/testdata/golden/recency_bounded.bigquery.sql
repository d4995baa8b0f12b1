WITH e AS (
  SELECT * FROM `proj.analytics.events`
  WHERE tenant_id = @p0
    AND event_type IN UNNEST(@p8)
    AND occurred_at >= @p4
  QUALIFY ROW_NUMBER() OVER (PARTITION BY event_id ORDER BY received_at) = 1
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
WITH e AS (
  SELECT * FROM `proj.analytics.events`
  WHERE tenant_id = 42
    AND event_type IN UNNEST(['page_view', 'order_completed'])
    AND occurred_at >= TIMESTAMP '2026-10-22 12:00:00Z'
  QUALIFY ROW_NUMBER() OVER (PARTITION BY event_id ORDER BY received_at) = 1
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
