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
    AND r.event_type IN UNNEST(@p4)
    AND r.occurred_at >= @p1
  QUALIFY ROW_NUMBER() OVER (PARTITION BY r.event_id ORDER BY r.received_at) = 1
),
a AS (
  SELECT e.user_id,
    COUNTIF(e.event_type = @p2 AND e.occurred_at >= @p1) AS a0
  FROM e
  GROUP BY e.user_id
)
SELECT a.user_id
FROM a
WHERE (COALESCE(a.user_id IN UNNEST(@seg3), FALSE) AND NOT COALESCE(a.user_id IN UNNEST(@seg4), FALSE) AND COALESCE(COALESCE(a.a0, 0) >= @p3, FALSE))
-- params:
-- @p0 = int64(42)
-- @p1 = time.Time(2026-10-22T12:00:00Z)
-- @p2 = string("page_view")
-- @p3 = int64(1)
-- @p4 = []string{"page_view"}
-- @seg3 = members of segment 3, bound at run time
-- @seg4 = members of segment 4, bound at run time
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
    AND r.event_type IN UNNEST(['page_view'])
    AND r.occurred_at >= TIMESTAMP '2026-10-22 12:00:00Z'
  QUALIFY ROW_NUMBER() OVER (PARTITION BY r.event_id ORDER BY r.received_at) = 1
),
a AS (
  SELECT e.user_id,
    COUNTIF(e.event_type = 'page_view' AND e.occurred_at >= TIMESTAMP '2026-10-22 12:00:00Z') AS a0
  FROM e
  GROUP BY e.user_id
)
SELECT a.user_id
FROM a
WHERE (COALESCE(a.user_id IN UNNEST(@seg3 /* members of segment 3, bound at run time */), FALSE) AND NOT COALESCE(a.user_id IN UNNEST(@seg4 /* members of segment 4, bound at run time */), FALSE) AND COALESCE(COALESCE(a.a0, 0) >= 1, FALSE))
