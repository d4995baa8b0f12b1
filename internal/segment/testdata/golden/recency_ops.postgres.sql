WITH s0 AS (
  SELECT user_id, events, last_at FROM warehouse.user_event_stats WHERE tenant_id = $1 AND event_type = $2::text
),
s1 AS (
  SELECT user_id, events, last_at FROM warehouse.user_event_stats WHERE tenant_id = $1 AND event_type = $4::text
),
s2 AS (
  SELECT user_id, events, last_at FROM warehouse.user_event_stats WHERE tenant_id = $1 AND event_type = $7::text
)
SELECT user_id
FROM s0
  FULL JOIN s1 USING (user_id)
  FULL JOIN s2 USING (user_id)
WHERE (COALESCE(s0.last_at < $3::timestamptz, FALSE) OR COALESCE(s0.last_at <= $3::timestamptz, FALSE) OR COALESCE(s1.last_at > $5::timestamptz, FALSE) OR COALESCE(s1.last_at >= $6::timestamptz, FALSE) OR COALESCE((s2.last_at <= $3::timestamptz AND s2.last_at > $8::timestamptz), FALSE) OR COALESCE((s2.last_at > $9::timestamptz OR s2.last_at <= $10::timestamptz), FALSE))
-- params:
-- $1 = int64(42)
-- $2 = string("page_view")
-- $3 = time.Time(2026-10-22T12:00:00Z)
-- $4 = string("order_completed")
-- $5 = time.Time(2026-11-14T12:00:00Z)
-- $6 = time.Time(2026-11-21T12:00:00Z)
-- $7 = string("signup")
-- $8 = time.Time(2026-10-21T12:00:00Z)
-- $9 = time.Time(2026-11-20T12:00:00Z)
-- $10 = time.Time(2026-11-19T12:00:00Z)
-- display:
WITH s0 AS (
  SELECT user_id, events, last_at FROM warehouse.user_event_stats WHERE tenant_id = 42 AND event_type = 'page_view'::text
),
s1 AS (
  SELECT user_id, events, last_at FROM warehouse.user_event_stats WHERE tenant_id = 42 AND event_type = 'order_completed'::text
),
s2 AS (
  SELECT user_id, events, last_at FROM warehouse.user_event_stats WHERE tenant_id = 42 AND event_type = 'signup'::text
)
SELECT user_id
FROM s0
  FULL JOIN s1 USING (user_id)
  FULL JOIN s2 USING (user_id)
WHERE (COALESCE(s0.last_at < '2026-10-22 12:00:00Z'::timestamptz, FALSE) OR COALESCE(s0.last_at <= '2026-10-22 12:00:00Z'::timestamptz, FALSE) OR COALESCE(s1.last_at > '2026-11-14 12:00:00Z'::timestamptz, FALSE) OR COALESCE(s1.last_at >= '2026-11-21 12:00:00Z'::timestamptz, FALSE) OR COALESCE((s2.last_at <= '2026-10-22 12:00:00Z'::timestamptz AND s2.last_at > '2026-10-21 12:00:00Z'::timestamptz), FALSE) OR COALESCE((s2.last_at > '2026-11-20 12:00:00Z'::timestamptz OR s2.last_at <= '2026-11-19 12:00:00Z'::timestamptz), FALSE))
