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
    COUNTIF(e.event_type = @p2 AND e.occurred_at >= @p1) AS a0
  FROM e
  GROUP BY e.user_id
)
SELECT u.user_id
FROM u
WHERE (COALESCE(u.user_id IN UNNEST(@seg3), FALSE) OR COALESCE(COALESCE(u.a0, 0) >= @p3, FALSE))
-- params:
-- @p0 = int64(42)
-- @p1 = time.Time(2026-11-14T12:00:00Z)
-- @p2 = string("page_view")
-- @p3 = int64(1)
-- @seg3 = members of segment 3, bound at run time
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
    COUNTIF(e.event_type = 'page_view' AND e.occurred_at >= TIMESTAMP '2026-11-14 12:00:00Z') AS a0
  FROM e
  GROUP BY e.user_id
)
SELECT u.user_id
FROM u
WHERE (COALESCE(u.user_id IN UNNEST(@seg3 /* members of segment 3, bound at run time */), FALSE) OR COALESCE(COALESCE(u.a0, 0) >= 1, FALSE))
