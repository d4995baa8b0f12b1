WITH a AS (
  SELECT e.user_id,
    SUM(warehouse.jnum(e.payload -> $3::text)) FILTER (WHERE e.event_type = $4::text AND e.occurred_at >= $2::timestamptz) AS a0
  FROM warehouse.events e
  WHERE e.tenant_id = $1
    AND e.event_type = ANY($6::text[])
    AND e.occurred_at >= $2::timestamptz
  GROUP BY e.user_id
)
SELECT u.user_id
FROM profiles u
  LEFT JOIN a ON a.user_id = u.user_id
WHERE u.tenant_id = $1
  AND (NOT COALESCE(COALESCE(a.a0, 0) > $5::numeric, FALSE))
-- params:
-- $1 = int64(42)
-- $2 = time.Time(2026-11-14T12:00:00Z)
-- $3 = string("amount")
-- $4 = string("order_completed")
-- $5 = float64(100)
-- $6 = []string{"order_completed"}
-- display:
WITH a AS (
  SELECT e.user_id,
    SUM(warehouse.jnum(e.payload -> 'amount'::text)) FILTER (WHERE e.event_type = 'order_completed'::text AND e.occurred_at >= '2026-11-14 12:00:00Z'::timestamptz) AS a0
  FROM warehouse.events e
  WHERE e.tenant_id = 42
    AND e.event_type = ANY(ARRAY['order_completed']::text[])
    AND e.occurred_at >= '2026-11-14 12:00:00Z'::timestamptz
  GROUP BY e.user_id
)
SELECT u.user_id
FROM profiles u
  LEFT JOIN a ON a.user_id = u.user_id
WHERE u.tenant_id = 42
  AND (NOT COALESCE(COALESCE(a.a0, 0) > 100::numeric, FALSE))
