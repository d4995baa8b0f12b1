WITH a AS (
  SELECT COALESCE(l.user_id, e.user_id) AS user_id,
    SUM(warehouse.jnum(e.payload -> $3::text)) FILTER (WHERE e.event_type = $4::text AND e.occurred_at >= $2::timestamptz) AS a0,
    COUNT(*) FILTER (WHERE e.event_type = $4::text AND e.occurred_at >= $2::timestamptz) AS a1
  FROM warehouse.events e
    LEFT JOIN identity_links l ON l.tenant_id = $1 AND l.anonymous_id = e.user_id
  WHERE e.tenant_id = $1
    AND e.event_type = ANY($8::text[])
    AND e.occurred_at >= $2::timestamptz
  GROUP BY 1
)
SELECT user_id
FROM a
WHERE (COALESCE(COALESCE(a.a0, 0) >= $5::numeric, FALSE) AND COALESCE(COALESCE(a.a0, 0) < $6::numeric, FALSE) AND COALESCE(COALESCE(a.a1, 0) >= $7::bigint, FALSE))
-- params:
-- $1 = int64(42)
-- $2 = time.Time(2026-10-22T12:00:00Z)
-- $3 = string("amount")
-- $4 = string("order_completed")
-- $5 = float64(100)
-- $6 = float64(500)
-- $7 = int64(2)
-- $8 = []string{"order_completed"}
-- display:
WITH a AS (
  SELECT COALESCE(l.user_id, e.user_id) AS user_id,
    SUM(warehouse.jnum(e.payload -> 'amount'::text)) FILTER (WHERE e.event_type = 'order_completed'::text AND e.occurred_at >= '2026-10-22 12:00:00Z'::timestamptz) AS a0,
    COUNT(*) FILTER (WHERE e.event_type = 'order_completed'::text AND e.occurred_at >= '2026-10-22 12:00:00Z'::timestamptz) AS a1
  FROM warehouse.events e
    LEFT JOIN identity_links l ON l.tenant_id = 42 AND l.anonymous_id = e.user_id
  WHERE e.tenant_id = 42
    AND e.event_type = ANY(ARRAY['order_completed']::text[])
    AND e.occurred_at >= '2026-10-22 12:00:00Z'::timestamptz
  GROUP BY 1
)
SELECT user_id
FROM a
WHERE (COALESCE(COALESCE(a.a0, 0) >= 100::numeric, FALSE) AND COALESCE(COALESCE(a.a0, 0) < 500::numeric, FALSE) AND COALESCE(COALESCE(a.a1, 0) >= 2::bigint, FALSE))
