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
    AND r.event_type IN UNNEST(@p6)
  QUALIFY ROW_NUMBER() OVER (PARTITION BY r.event_id ORDER BY r.received_at) = 1
),
a AS (
  SELECT e.user_id,
    SUM(IF(e.event_type = @p2, SAFE_CAST(LAX_STRING(e.payload[@p1]) AS BIGNUMERIC), NULL)) AS a0,
    MAX(IF(e.event_type = @p4, e.occurred_at, NULL)) AS a1
  FROM e
  GROUP BY e.user_id
)
SELECT a.user_id
FROM a
WHERE (COALESCE(COALESCE(a.a0, 0) >= @p3, FALSE) AND COALESCE(a.a1 < @p5, FALSE))
-- params:
-- @p0 = int64(42)
-- @p1 = string("amount")
-- @p2 = string("order_completed")
-- @p3 = float64(100)
-- @p4 = string("page_view")
-- @p5 = time.Time(2026-10-22T12:00:00Z)
-- @p6 = []string{"order_completed", "page_view"}
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
  QUALIFY ROW_NUMBER() OVER (PARTITION BY r.event_id ORDER BY r.received_at) = 1
),
a AS (
  SELECT e.user_id,
    SUM(IF(e.event_type = 'order_completed', SAFE_CAST(LAX_STRING(e.payload['amount']) AS BIGNUMERIC), NULL)) AS a0,
    MAX(IF(e.event_type = 'page_view', e.occurred_at, NULL)) AS a1
  FROM e
  GROUP BY e.user_id
)
SELECT a.user_id
FROM a
WHERE (COALESCE(COALESCE(a.a0, 0) >= 100, FALSE) AND COALESCE(a.a1 < TIMESTAMP '2026-10-22 12:00:00Z', FALSE))
