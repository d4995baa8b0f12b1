WITH e AS (
  SELECT * FROM `proj.analytics.events`
  WHERE tenant_id = @p0
  QUALIFY ROW_NUMBER() OVER (PARTITION BY event_id ORDER BY received_at) = 1
)
SELECT u.user_id
FROM (SELECT DISTINCT e.user_id FROM e) u
WHERE (COALESCE(u.user_id IN UNNEST(@seg3), FALSE))
-- params:
-- @p0 = int64(42)
-- @seg3 = members of segment 3, bound at run time
-- display:
WITH e AS (
  SELECT * FROM `proj.analytics.events`
  WHERE tenant_id = 42
  QUALIFY ROW_NUMBER() OVER (PARTITION BY event_id ORDER BY received_at) = 1
)
SELECT u.user_id
FROM (SELECT DISTINCT e.user_id FROM e) u
WHERE (COALESCE(u.user_id IN UNNEST(@seg3 /* members of segment 3, bound at run time */), FALSE))
