WITH s0 AS (
  SELECT user_id, n, total, min, max FROM warehouse.user_property_stats WHERE tenant_id = $1 AND event_type = $2::text AND property = $3::text
),
s1 AS (
  SELECT user_id, events, last_at FROM warehouse.user_event_stats WHERE tenant_id = $1 AND event_type = $5::text
)
SELECT u.user_id
FROM profiles u
  LEFT JOIN s0 ON s0.user_id = u.user_id
  LEFT JOIN s1 ON s1.user_id = u.user_id
WHERE u.tenant_id = $1
  AND NOT (COALESCE(s0.total / NULLIF(s0.n, 0) > $4::numeric, FALSE) OR COALESCE(s1.last_at > $6::timestamptz, FALSE))
-- params:
-- $1 = int64(42)
-- $2 = string("order_completed")
-- $3 = string("amount")
-- $4 = float64(50)
-- $5 = string("page_view")
-- $6 = time.Time(2026-11-14T12:00:00Z)
-- display:
WITH s0 AS (
  SELECT user_id, n, total, min, max FROM warehouse.user_property_stats WHERE tenant_id = 42 AND event_type = 'order_completed'::text AND property = 'amount'::text
),
s1 AS (
  SELECT user_id, events, last_at FROM warehouse.user_event_stats WHERE tenant_id = 42 AND event_type = 'page_view'::text
)
SELECT u.user_id
FROM profiles u
  LEFT JOIN s0 ON s0.user_id = u.user_id
  LEFT JOIN s1 ON s1.user_id = u.user_id
WHERE u.tenant_id = 42
  AND NOT (COALESCE(s0.total / NULLIF(s0.n, 0) > 50::numeric, FALSE) OR COALESCE(s1.last_at > '2026-11-14 12:00:00Z'::timestamptz, FALSE))
