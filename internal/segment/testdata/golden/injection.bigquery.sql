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
    LOGICAL_OR(IF(e.event_type = @p3, COALESCE(LAX_STRING(e.payload[@p1]) = @p2, FALSE), NULL)) AS a0,
    ARRAY_AGG(IF(e.event_type = 'context_identified' AND e.payload[@p4] IS NOT NULL AND JSON_TYPE(e.payload[@p4]) <> 'null', e.payload[@p4], NULL) IGNORE NULLS ORDER BY e.occurred_at DESC LIMIT 1)[SAFE_OFFSET(0)] AS a1,
    SUM(IF(e.event_type = @p7, SAFE_CAST(LAX_STRING(e.payload[@p6]) AS BIGNUMERIC), NULL)) AS a2,
    ARRAY_AGG(IF(e.event_type = 'context_identified' AND e.payload[@p9] IS NOT NULL AND JSON_TYPE(e.payload[@p9]) <> 'null', e.payload[@p9], NULL) IGNORE NULLS ORDER BY e.occurred_at DESC LIMIT 1)[SAFE_OFFSET(0)] AS a3
  FROM e
  GROUP BY e.user_id
)
SELECT u.user_id
FROM u
WHERE (COALESCE(u.a0, FALSE) OR COALESCE(LAX_STRING(u.a1) IN UNNEST(@p5), FALSE) OR COALESCE(COALESCE(u.a2, 0) > @p8, FALSE) OR COALESCE(STRPOS(LOWER(LAX_STRING(u.a3)), LOWER(@p10)) > 0, FALSE))
-- params:
-- @p0 = int64(42)
-- @p1 = string("amount\" OR 1=1 --")
-- @p2 = string("O'Brien \\' $1 @p0")
-- @p3 = string("order'); DROP TABLE profiles; --")
-- @p4 = string("$1")
-- @p5 = []string{"a'b", "c\\d", "line\nbreak", "@seg3", "' OR ''='"}
-- @p6 = string("{a,b}")
-- @p7 = string("*/ SELECT 1 /*")
-- @p8 = float64(1)
-- @p9 = string("plan' || '")
-- @p10 = string("%_\\")
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
    LOGICAL_OR(IF(e.event_type = 'order\'); DROP TABLE profiles; --', COALESCE(LAX_STRING(e.payload['amount" OR 1=1 --']) = 'O\'Brien \\\' $1 @p0', FALSE), NULL)) AS a0,
    ARRAY_AGG(IF(e.event_type = 'context_identified' AND e.payload['$1'] IS NOT NULL AND JSON_TYPE(e.payload['$1']) <> 'null', e.payload['$1'], NULL) IGNORE NULLS ORDER BY e.occurred_at DESC LIMIT 1)[SAFE_OFFSET(0)] AS a1,
    SUM(IF(e.event_type = '*/ SELECT 1 /*', SAFE_CAST(LAX_STRING(e.payload['{a,b}']) AS BIGNUMERIC), NULL)) AS a2,
    ARRAY_AGG(IF(e.event_type = 'context_identified' AND e.payload['plan\' || \''] IS NOT NULL AND JSON_TYPE(e.payload['plan\' || \'']) <> 'null', e.payload['plan\' || \''], NULL) IGNORE NULLS ORDER BY e.occurred_at DESC LIMIT 1)[SAFE_OFFSET(0)] AS a3
  FROM e
  GROUP BY e.user_id
)
SELECT u.user_id
FROM u
WHERE (COALESCE(u.a0, FALSE) OR COALESCE(LAX_STRING(u.a1) IN UNNEST(['a\'b', 'c\\d', 'line\nbreak', '@seg3', '\' OR \'\'=\'']), FALSE) OR COALESCE(COALESCE(u.a2, 0) > 1, FALSE) OR COALESCE(STRPOS(LOWER(LAX_STRING(u.a3)), LOWER('%_\\')) > 0, FALSE))
