WITH e AS (
  SELECT * FROM `proj.analytics.events`
  WHERE tenant_id = @p0
  QUALIFY ROW_NUMBER() OVER (PARTITION BY event_id ORDER BY received_at) = 1
),
u AS (
  SELECT e.user_id,
    COUNTIF(e.event_type = @p2 AND e.occurred_at >= @p1) AS a0
  FROM e
  GROUP BY e.user_id
)
SELECT u.user_id
FROM u
WHERE (COALESCE(COALESCE(u.a0, 0) = @p3, FALSE))
-- params:
-- @p0 = int64(42)
-- @p1 = time.Time(2026-10-22T12:00:00Z)
-- @p2 = string("order_completed")
-- @p3 = int64(0)
-- display:
WITH e AS (
  SELECT * FROM `proj.analytics.events`
  WHERE tenant_id = 42
  QUALIFY ROW_NUMBER() OVER (PARTITION BY event_id ORDER BY received_at) = 1
),
u AS (
  SELECT e.user_id,
    COUNTIF(e.event_type = 'order_completed' AND e.occurred_at >= TIMESTAMP '2026-10-22 12:00:00Z') AS a0
  FROM e
  GROUP BY e.user_id
)
SELECT u.user_id
FROM u
WHERE (COALESCE(COALESCE(u.a0, 0) = 0, FALSE))
