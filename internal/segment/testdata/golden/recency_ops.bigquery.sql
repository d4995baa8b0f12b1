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
    MAX(IF(e.event_type = @p1, e.occurred_at, NULL)) AS a0,
    MAX(IF(e.event_type = @p4 AND e.occurred_at >= @p3, e.occurred_at, NULL)) AS a1,
    MAX(IF(e.event_type = @p4 AND e.occurred_at >= @p6, e.occurred_at, NULL)) AS a2,
    MAX(IF(e.event_type = @p8, e.occurred_at, NULL)) AS a3
  FROM e
  GROUP BY e.user_id
)
SELECT a.user_id
FROM a
WHERE (COALESCE(a.a0 < @p2, FALSE) OR COALESCE(a.a0 <= @p2, FALSE) OR COALESCE(a.a1 > @p5, FALSE) OR COALESCE(a.a2 >= @p7, FALSE) OR COALESCE((a.a3 <= @p2 AND a.a3 > @p9), FALSE) OR COALESCE((a.a3 > @p6 OR a.a3 <= @p10), FALSE))
-- params:
-- @p0 = int64(42)
-- @p1 = string("page_view")
-- @p2 = time.Time(2026-10-22T12:00:00Z)
-- @p3 = time.Time(2026-11-13T12:00:00Z)
-- @p4 = string("order_completed")
-- @p5 = time.Time(2026-11-14T12:00:00Z)
-- @p6 = time.Time(2026-11-20T12:00:00Z)
-- @p7 = time.Time(2026-11-21T12:00:00Z)
-- @p8 = string("signup")
-- @p9 = time.Time(2026-10-21T12:00:00Z)
-- @p10 = time.Time(2026-11-19T12:00:00Z)
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
    MAX(IF(e.event_type = 'page_view', e.occurred_at, NULL)) AS a0,
    MAX(IF(e.event_type = 'order_completed' AND e.occurred_at >= TIMESTAMP '2026-11-13 12:00:00Z', e.occurred_at, NULL)) AS a1,
    MAX(IF(e.event_type = 'order_completed' AND e.occurred_at >= TIMESTAMP '2026-11-20 12:00:00Z', e.occurred_at, NULL)) AS a2,
    MAX(IF(e.event_type = 'signup', e.occurred_at, NULL)) AS a3
  FROM e
  GROUP BY e.user_id
)
SELECT a.user_id
FROM a
WHERE (COALESCE(a.a0 < TIMESTAMP '2026-10-22 12:00:00Z', FALSE) OR COALESCE(a.a0 <= TIMESTAMP '2026-10-22 12:00:00Z', FALSE) OR COALESCE(a.a1 > TIMESTAMP '2026-11-14 12:00:00Z', FALSE) OR COALESCE(a.a2 >= TIMESTAMP '2026-11-21 12:00:00Z', FALSE) OR COALESCE((a.a3 <= TIMESTAMP '2026-10-22 12:00:00Z' AND a.a3 > TIMESTAMP '2026-10-21 12:00:00Z'), FALSE) OR COALESCE((a.a3 > TIMESTAMP '2026-11-20 12:00:00Z' OR a.a3 <= TIMESTAMP '2026-11-19 12:00:00Z'), FALSE))
