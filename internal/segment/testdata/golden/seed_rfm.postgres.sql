WITH s0 AS (
  SELECT user_id, n, total, min, max FROM warehouse.user_property_stats WHERE tenant_id = $1 AND event_type = $2::text AND property = $3::text
),
s1 AS (
  SELECT user_id, events, last_at FROM warehouse.user_event_stats WHERE tenant_id = $1 AND event_type = $5::text
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
  SELECT user_id, n, total, min, max FROM warehouse.user_property_stats WHERE tenant_id = 42 AND event_type = 'order_completed'::text AND property = 'amount'::text
),
s1 AS (
  SELECT user_id, events, last_at FROM warehouse.user_event_stats WHERE tenant_id = 42 AND event_type = 'page_view'::text
)
SELECT user_id
FROM s0
  JOIN s1 USING (user_id)
WHERE (COALESCE(COALESCE(s0.total, 0) >= 100::numeric, FALSE) AND COALESCE(s1.last_at < '2026-10-22 12:00:00Z'::timestamptz, FALSE))
