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
    AND r.event_type IN UNNEST(@p23)
  QUALIFY ROW_NUMBER() OVER (PARTITION BY r.event_id ORDER BY r.received_at) = 1
),
a AS (
  SELECT e.user_id,
    LOGICAL_OR(IF(e.event_type = @p4 AND e.occurred_at >= @p1, COALESCE(LAX_STRING(e.payload[@p2]) = @p3, FALSE), NULL)) AS a0,
    LOGICAL_OR(IF(e.event_type = @p4, COALESCE(LAX_STRING(e.payload[@p2]) IS DISTINCT FROM @p5, FALSE), NULL)) AS a1,
    LOGICAL_OR(IF(e.event_type = @p4 AND e.occurred_at >= @p6 AND e.occurred_at < @p7, COALESCE(STRPOS(LOWER(LAX_STRING(e.payload[@p2])), LOWER(@p8)) > 0, FALSE), NULL)) AS a2,
    LOGICAL_OR(IF(e.event_type = @p4, COALESCE(STARTS_WITH(LOWER(LAX_STRING(e.payload[@p2])), LOWER(@p9)), FALSE), NULL)) AS a3,
    LOGICAL_OR(IF(e.event_type = @p12, COALESCE(LAX_STRING(e.payload[@p10]) IN UNNEST(@p11), FALSE), NULL)) AS a4,
    LOGICAL_OR(IF(e.event_type = @p12, COALESCE(JSON_TYPE(e.payload[@p13]) <> 'null', FALSE), NULL)) AS a5,
    LOGICAL_OR(IF(e.event_type = @p12, COALESCE(SAFE_CAST(LAX_STRING(e.payload[@p14]) AS BIGNUMERIC) > @p15, FALSE), NULL)) AS a6,
    LOGICAL_OR(IF(e.event_type = @p12, COALESCE(SAFE_CAST(LAX_STRING(e.payload[@p14]) AS BIGNUMERIC) >= @p16, FALSE), NULL)) AS a7,
    LOGICAL_OR(IF(e.event_type = @p12, COALESCE(SAFE_CAST(LAX_STRING(e.payload[@p14]) AS BIGNUMERIC) < @p17, FALSE), NULL)) AS a8,
    LOGICAL_OR(IF(e.event_type = @p12, COALESCE(SAFE_CAST(LAX_STRING(e.payload[@p18]) AS BIGNUMERIC) <= @p19, FALSE), NULL)) AS a9,
    LOGICAL_OR(IF(e.event_type = @p12, COALESCE(SAFE_CAST(LAX_STRING(e.payload[@p14]) AS BIGNUMERIC) = @p20, FALSE), NULL)) AS a10,
    LOGICAL_OR(IF(e.event_type = @p12, COALESCE(LAX_STRING(e.payload[@p21]) = @p22, FALSE), NULL)) AS a11
  FROM e
  GROUP BY e.user_id
)
SELECT a.user_id
FROM a
WHERE (COALESCE(a.a0, FALSE) OR COALESCE(a.a1, FALSE) OR COALESCE(a.a2, FALSE) OR COALESCE(a.a3, FALSE) OR COALESCE(a.a4, FALSE) OR COALESCE(a.a5, FALSE) OR COALESCE(a.a6, FALSE) OR COALESCE(a.a7, FALSE) OR COALESCE(a.a8, FALSE) OR COALESCE(a.a9, FALSE) OR COALESCE(a.a10, FALSE) OR COALESCE(a.a11, FALSE))
-- params:
-- @p0 = int64(42)
-- @p1 = time.Time(2026-11-14T12:00:00Z)
-- @p2 = string("path")
-- @p3 = string("/pricing")
-- @p4 = string("page_view")
-- @p5 = string("/home")
-- @p6 = time.Time(2026-10-22T12:00:00Z)
-- @p7 = time.Time(2026-11-20T12:00:00Z)
-- @p8 = string("Pricing")
-- @p9 = string("/blog")
-- @p10 = string("currency")
-- @p11 = []string{"EUR", "USD", "1", "true"}
-- @p12 = string("order_completed")
-- @p13 = string("coupon")
-- @p14 = string("amount")
-- @p15 = float64(150)
-- @p16 = float64(12.5)
-- @p17 = float64(-10)
-- @p18 = string("qty")
-- @p19 = float64(1)
-- @p20 = float64(30.5)
-- @p21 = string("gift")
-- @p22 = string("true")
-- @p23 = []string{"page_view", "order_completed"}
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
    AND r.event_type IN UNNEST(['page_view', 'order_completed'])
  QUALIFY ROW_NUMBER() OVER (PARTITION BY r.event_id ORDER BY r.received_at) = 1
),
a AS (
  SELECT e.user_id,
    LOGICAL_OR(IF(e.event_type = 'page_view' AND e.occurred_at >= TIMESTAMP '2026-11-14 12:00:00Z', COALESCE(LAX_STRING(e.payload['path']) = '/pricing', FALSE), NULL)) AS a0,
    LOGICAL_OR(IF(e.event_type = 'page_view', COALESCE(LAX_STRING(e.payload['path']) IS DISTINCT FROM '/home', FALSE), NULL)) AS a1,
    LOGICAL_OR(IF(e.event_type = 'page_view' AND e.occurred_at >= TIMESTAMP '2026-10-22 12:00:00Z' AND e.occurred_at < TIMESTAMP '2026-11-20 12:00:00Z', COALESCE(STRPOS(LOWER(LAX_STRING(e.payload['path'])), LOWER('Pricing')) > 0, FALSE), NULL)) AS a2,
    LOGICAL_OR(IF(e.event_type = 'page_view', COALESCE(STARTS_WITH(LOWER(LAX_STRING(e.payload['path'])), LOWER('/blog')), FALSE), NULL)) AS a3,
    LOGICAL_OR(IF(e.event_type = 'order_completed', COALESCE(LAX_STRING(e.payload['currency']) IN UNNEST(['EUR', 'USD', '1', 'true']), FALSE), NULL)) AS a4,
    LOGICAL_OR(IF(e.event_type = 'order_completed', COALESCE(JSON_TYPE(e.payload['coupon']) <> 'null', FALSE), NULL)) AS a5,
    LOGICAL_OR(IF(e.event_type = 'order_completed', COALESCE(SAFE_CAST(LAX_STRING(e.payload['amount']) AS BIGNUMERIC) > 150, FALSE), NULL)) AS a6,
    LOGICAL_OR(IF(e.event_type = 'order_completed', COALESCE(SAFE_CAST(LAX_STRING(e.payload['amount']) AS BIGNUMERIC) >= 12.5, FALSE), NULL)) AS a7,
    LOGICAL_OR(IF(e.event_type = 'order_completed', COALESCE(SAFE_CAST(LAX_STRING(e.payload['amount']) AS BIGNUMERIC) < -10, FALSE), NULL)) AS a8,
    LOGICAL_OR(IF(e.event_type = 'order_completed', COALESCE(SAFE_CAST(LAX_STRING(e.payload['qty']) AS BIGNUMERIC) <= 1, FALSE), NULL)) AS a9,
    LOGICAL_OR(IF(e.event_type = 'order_completed', COALESCE(SAFE_CAST(LAX_STRING(e.payload['amount']) AS BIGNUMERIC) = 30.5, FALSE), NULL)) AS a10,
    LOGICAL_OR(IF(e.event_type = 'order_completed', COALESCE(LAX_STRING(e.payload['gift']) = 'true', FALSE), NULL)) AS a11
  FROM e
  GROUP BY e.user_id
)
SELECT a.user_id
FROM a
WHERE (COALESCE(a.a0, FALSE) OR COALESCE(a.a1, FALSE) OR COALESCE(a.a2, FALSE) OR COALESCE(a.a3, FALSE) OR COALESCE(a.a4, FALSE) OR COALESCE(a.a5, FALSE) OR COALESCE(a.a6, FALSE) OR COALESCE(a.a7, FALSE) OR COALESCE(a.a8, FALSE) OR COALESCE(a.a9, FALSE) OR COALESCE(a.a10, FALSE) OR COALESCE(a.a11, FALSE))
