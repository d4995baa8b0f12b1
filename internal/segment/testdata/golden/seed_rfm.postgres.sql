WITH s0 AS (
  SELECT COALESCE(l.user_id, r.user_id) AS user_id, SUM(r.n)::bigint AS n, SUM(r.total) AS total, MIN(r.min) AS min, MAX(r.max) AS max
  FROM warehouse.user_property_stats r
    LEFT JOIN identity_links l ON l.tenant_id = $1 AND l.anonymous_id = r.user_id
  WHERE r.tenant_id = $1 AND r.event_type = $2::text AND r.property = $3::text
  GROUP BY 1
),
s1 AS (
  SELECT COALESCE(l.user_id, r.user_id) AS user_id, SUM(r.events)::bigint AS events, MAX(r.last_at) AS last_at
  FROM warehouse.user_event_stats r
    LEFT JOIN identity_links l ON l.tenant_id = $1 AND l.anonymous_id = r.user_id
  WHERE r.tenant_id = $1 AND r.event_type = $5::text
  GROUP BY 1
)
SELECT user_id
FROM s0
  JOIN s1 USING (user_id)
WHERE (COALESCE(COALESCE(s0.total, 0) >= $4::numeric, FALSE) AND COALESCE(s1.last_at < $6::timestamptz, FALSE))
-- params:
-- $1 = int64(42)
-- $2 = string("order_completed")
-- $3 = string("amount")
-- $4 = float64(100)
-- $5 = string("page_view")
-- $6 = time.Time(2026-10-22T12:00:00Z)
-- display:
WITH s0 AS (
  SELECT COALESCE(l.user_id, r.user_id) AS user_id, SUM(r.n)::bigint AS n, SUM(r.total) AS total, MIN(r.min) AS min, MAX(r.max) AS max
  FROM warehouse.user_property_stats r
    LEFT JOIN identity_links l ON l.tenant_id = 42 AND l.anonymous_id = r.user_id
  WHERE r.tenant_id = 42 AND r.event_type = 'order_completed'::text AND r.property = 'amount'::text
  GROUP BY 1
),
s1 AS (
  SELECT COALESCE(l.user_id, r.user_id) AS user_id, SUM(r.events)::bigint AS events, MAX(r.last_at) AS last_at
  FROM warehouse.user_event_stats r
    LEFT JOIN identity_links l ON l.tenant_id = 42 AND l.anonymous_id = r.user_id
  WHERE r.tenant_id = 42 AND r.event_type = 'page_view'::text
  GROUP BY 1
)
SELECT user_id
FROM s0
  JOIN s1 USING (user_id)
WHERE (COALESCE(COALESCE(s0.total, 0) >= 100::numeric, FALSE) AND COALESCE(s1.last_at < '2026-10-22 12:00:00Z'::timestamptz, FALSE))
