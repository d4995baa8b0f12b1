WITH s0 AS (
  SELECT user_id, events, last_at FROM warehouse.user_event_stats WHERE tenant_id = $1 AND event_type = $9::text
),
s1 AS (
  SELECT user_id, events, last_at FROM warehouse.user_event_stats WHERE tenant_id = $1 AND event_type = $3::text
),
a AS (
  SELECT e.user_id,
    COUNT(*) FILTER (WHERE e.event_type = $3::text AND e.occurred_at >= $2::timestamptz) AS a0,
    COUNT(*) FILTER (WHERE e.event_type = $7::text AND e.occurred_at >= $5::timestamptz AND e.occurred_at < $6::timestamptz) AS a1
  FROM warehouse.events e
  WHERE e.tenant_id = $1
    AND e.event_type = ANY($12::text[])
    AND e.occurred_at >= $5::timestamptz
  GROUP BY e.user_id
)
SELECT user_id
FROM a
  LEFT JOIN s0 USING (user_id)
  LEFT JOIN s1 USING (user_id)
WHERE (COALESCE(COALESCE(a.a0, 0) >= $4::bigint, FALSE) AND COALESCE(COALESCE(a.a1, 0) < $8::bigint, FALSE) AND COALESCE(COALESCE(s0.events, 0) <> $10::bigint, FALSE) AND COALESCE(COALESCE(s1.events, 0) <= $11::bigint, FALSE))
-- params:
-- $1 = int64(42)
-- $2 = time.Time(2026-10-22T12:00:00Z)
-- $3 = string("page_view")
-- $4 = int64(2)
-- $5 = time.Time(2026-10-07T12:00:00Z)
-- $6 = time.Time(2026-11-21T12:00:00Z)
-- $7 = string("order_completed")
-- $8 = int64(3)
-- $9 = string("signup")
-- $10 = int64(1)
-- $11 = int64(10)
-- $12 = []string{"page_view", "order_completed"}
-- display:
WITH s0 AS (
  SELECT user_id, events, last_at FROM warehouse.user_event_stats WHERE tenant_id = 42 AND event_type = 'signup'::text
),
s1 AS (
  SELECT user_id, events, last_at FROM warehouse.user_event_stats WHERE tenant_id = 42 AND event_type = 'page_view'::text
),
a AS (
  SELECT e.user_id,
    COUNT(*) FILTER (WHERE e.event_type = 'page_view'::text AND e.occurred_at >= '2026-10-22 12:00:00Z'::timestamptz) AS a0,
    COUNT(*) FILTER (WHERE e.event_type = 'order_completed'::text AND e.occurred_at >= '2026-10-07 12:00:00Z'::timestamptz AND e.occurred_at < '2026-11-21 12:00:00Z'::timestamptz) AS a1
  FROM warehouse.events e
  WHERE e.tenant_id = 42
    AND e.event_type = ANY(ARRAY['page_view', 'order_completed']::text[])
    AND e.occurred_at >= '2026-10-07 12:00:00Z'::timestamptz
  GROUP BY e.user_id
)
SELECT user_id
FROM a
  LEFT JOIN s0 USING (user_id)
  LEFT JOIN s1 USING (user_id)
WHERE (COALESCE(COALESCE(a.a0, 0) >= 2::bigint, FALSE) AND COALESCE(COALESCE(a.a1, 0) < 3::bigint, FALSE) AND COALESCE(COALESCE(s0.events, 0) <> 1::bigint, FALSE) AND COALESCE(COALESCE(s1.events, 0) <= 10::bigint, FALSE))
