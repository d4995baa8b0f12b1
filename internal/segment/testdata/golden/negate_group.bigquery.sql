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
    AND r.event_type IN UNNEST(@p10)
  QUALIFY ROW_NUMBER() OVER (PARTITION BY r.event_id ORDER BY r.received_at) = 1
),
a AS (
  SELECT e.user_id,
    COUNTIF(e.event_type = @p1) AS a0,
    LOGICAL_OR(IF(e.event_type = @p6 AND e.occurred_at >= @p3, COALESCE(STRPOS(LOWER(LAX_STRING(e.payload[@p4])), LOWER(@p5)) > 0, FALSE), NULL)) AS a1,
    MAX(IF(e.event_type = @p8 AND e.occurred_at >= @p7, e.occurred_at, NULL)) AS a2
  FROM e
  GROUP BY e.user_id
)
SELECT a.user_id
FROM a
WHERE (COALESCE(COALESCE(a.a0, 0) >= @p2, FALSE) AND NOT (COALESCE(a.a1, FALSE) OR COALESCE(a.a2 >= @p9, FALSE)))
-- params:
-- @p0 = int64(42)
-- @p1 = string("order_completed")
-- @p2 = int64(1)
-- @p3 = time.Time(2026-11-14T12:00:00Z)
-- @p4 = string("path")
-- @p5 = string("pricing")
-- @p6 = string("page_view")
-- @p7 = time.Time(2026-10-21T12:00:00Z)
-- @p8 = string("signup")
-- @p9 = time.Time(2026-10-22T12:00:00Z)
-- @p10 = []string{"order_completed", "page_view", "signup"}
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
    AND r.event_type IN UNNEST(['order_completed', 'page_view', 'signup'])
  QUALIFY ROW_NUMBER() OVER (PARTITION BY r.event_id ORDER BY r.received_at) = 1
),
a AS (
  SELECT e.user_id,
    COUNTIF(e.event_type = 'order_completed') AS a0,
    LOGICAL_OR(IF(e.event_type = 'page_view' AND e.occurred_at >= TIMESTAMP '2026-11-14 12:00:00Z', COALESCE(STRPOS(LOWER(LAX_STRING(e.payload['path'])), LOWER('pricing')) > 0, FALSE), NULL)) AS a1,
    MAX(IF(e.event_type = 'signup' AND e.occurred_at >= TIMESTAMP '2026-10-21 12:00:00Z', e.occurred_at, NULL)) AS a2
  FROM e
  GROUP BY e.user_id
)
SELECT a.user_id
FROM a
WHERE (COALESCE(COALESCE(a.a0, 0) >= 1, FALSE) AND NOT (COALESCE(a.a1, FALSE) OR COALESCE(a.a2 >= TIMESTAMP '2026-10-22 12:00:00Z', FALSE)))
