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
)
SELECT u.user_id
FROM (SELECT DISTINCT e.user_id FROM e) u
WHERE (COALESCE(u.user_id IN UNNEST(@seg3), FALSE))
-- params:
-- @p0 = int64(42)
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
)
SELECT u.user_id
FROM (SELECT DISTINCT e.user_id FROM e) u
WHERE (COALESCE(u.user_id IN UNNEST(@seg3 /* members of segment 3, bound at run time */), FALSE))
