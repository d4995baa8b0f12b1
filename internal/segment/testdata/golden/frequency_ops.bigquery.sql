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
    COUNTIF(e.event_type = @p2 AND e.occurred_at >= @p1) AS a0,
    COUNTIF(e.event_type = @p6 AND e.occurred_at >= @p4 AND e.occurred_at < @p5) AS a1,
    COUNTIF(e.event_type = @p8) AS a2,
    COUNTIF(e.event_type = @p2) AS a3
  FROM e
  GROUP BY e.user_id
)
SELECT a.user_id
FROM a
WHERE (COALESCE(COALESCE(a.a0, 0) >= @p3, FALSE) AND COALESCE(COALESCE(a.a1, 0) < @p7, FALSE) AND COALESCE(COALESCE(a.a2, 0) <> @p9, FALSE) AND COALESCE(COALESCE(a.a3, 0) <= @p10, FALSE))
-- params:
-- @p0 = int64(42)
-- @p1 = time.Time(2026-10-22T12:00:00Z)
-- @p2 = string("page_view")
-- @p3 = int64(2)
-- @p4 = time.Time(2026-10-07T12:00:00Z)
-- @p5 = time.Time(2026-11-21T12:00:00Z)
-- @p6 = string("order_completed")
-- @p7 = int64(3)
-- @p8 = string("signup")
-- @p9 = int64(1)
-- @p10 = int64(10)
-- @p11 = []string{"page_view", "order_completed", "signup"}
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
    AND r.event_type IN UNNEST(['page_view', 'order_completed', 'signup'])
  QUALIFY ROW_NUMBER() OVER (PARTITION BY r.event_id ORDER BY r.received_at) = 1
),
a AS (
  SELECT e.user_id,
    COUNTIF(e.event_type = 'page_view' AND e.occurred_at >= TIMESTAMP '2026-10-22 12:00:00Z') AS a0,
    COUNTIF(e.event_type = 'order_completed' AND e.occurred_at >= TIMESTAMP '2026-10-07 12:00:00Z' AND e.occurred_at < TIMESTAMP '2026-11-21 12:00:00Z') AS a1,
    COUNTIF(e.event_type = 'signup') AS a2,
    COUNTIF(e.event_type = 'page_view') AS a3
  FROM e
  GROUP BY e.user_id
)
SELECT a.user_id
FROM a
WHERE (COALESCE(COALESCE(a.a0, 0) >= 2, FALSE) AND COALESCE(COALESCE(a.a1, 0) < 3, FALSE) AND COALESCE(COALESCE(a.a2, 0) <> 1, FALSE) AND COALESCE(COALESCE(a.a3, 0) <= 10, FALSE))
