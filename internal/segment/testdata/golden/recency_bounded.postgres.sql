WITH s0 AS (
  SELECT user_id, events, last_at FROM warehouse.user_event_stats WHERE tenant_id = $1 AND event_type = $2::text
),
a AS (
  SELECT e.user_id,
    SUM(warehouse.jnum(e.payload -> $5::text)) FILTER (WHERE e.event_type = $6::text AND e.occurred_at >= $4::timestamptz) AS a0
  FROM warehouse.events e
  WHERE e.tenant_id = $1
    AND e.event_type = ANY($8::text[])
    AND e.occurred_at >= $4::timestamptz
  GROUP BY e.user_id
)
SELECT user_id
FROM s0
  JOIN a USING (user_id)
WHERE (COALESCE(s0.last_at >= $3::timestamptz, FALSE) AND COALESCE(COALESCE(a.a0, 0) > $7::numeric, FALSE))
-- params:
-- $1 = int64(42)
-- $2 = string("page_view")
-- $3 = time.Time(2026-11-14T12:00:00Z)
-- $4 = time.Time(2026-10-22T12:00:00Z)
-- $5 = string("amount")
-- $6 = string("order_completed")
-- $7 = float64(0)
-- $8 = []string{"order_completed"}
-- display:
WITH s0 AS (
  SELECT user_id, events, last_at FROM warehouse.user_event_stats WHERE tenant_id = 42 AND event_type = 'page_view'::text
),
a AS (
  SELECT e.user_id,
    SUM(warehouse.jnum(e.payload -> 'amount'::text)) FILTER (WHERE e.event_type = 'order_completed'::text AND e.occurred_at >= '2026-10-22 12:00:00Z'::timestamptz) AS a0
  FROM warehouse.events e
  WHERE e.tenant_id = 42
    AND e.event_type = ANY(ARRAY['order_completed']::text[])
    AND e.occurred_at >= '2026-10-22 12:00:00Z'::timestamptz
  GROUP BY e.user_id
)
SELECT user_id
FROM s0
  JOIN a USING (user_id)
WHERE (COALESCE(s0.last_at >= '2026-11-14 12:00:00Z'::timestamptz, FALSE) AND COALESCE(COALESCE(a.a0, 0) > 0::numeric, FALSE))
