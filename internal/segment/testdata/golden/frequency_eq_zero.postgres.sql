WITH a AS (
  SELECT e.user_id,
    COUNT(*) FILTER (WHERE e.event_type = $3::text AND e.occurred_at >= $2::timestamptz) AS a0
  FROM warehouse.events e
  WHERE e.tenant_id = $1
    AND e.event_type = ANY($5::text[])
    AND e.occurred_at >= $2::timestamptz
  GROUP BY e.user_id
)
SELECT u.user_id
FROM profiles u
  LEFT JOIN a ON a.user_id = u.user_id
WHERE u.tenant_id = $1
  AND (COALESCE(COALESCE(a.a0, 0) = $4::bigint, FALSE))
-- params:
-- $1 = int64(42)
-- $2 = time.Time(2026-10-22T12:00:00Z)
-- $3 = string("order_completed")
-- $4 = int64(0)
-- $5 = []string{"order_completed"}
-- display:
WITH a AS (
  SELECT e.user_id,
    COUNT(*) FILTER (WHERE e.event_type = 'order_completed'::text AND e.occurred_at >= '2026-10-22 12:00:00Z'::timestamptz) AS a0
  FROM warehouse.events e
  WHERE e.tenant_id = 42
    AND e.event_type = ANY(ARRAY['order_completed']::text[])
    AND e.occurred_at >= '2026-10-22 12:00:00Z'::timestamptz
  GROUP BY e.user_id
)
SELECT u.user_id
FROM profiles u
  LEFT JOIN a ON a.user_id = u.user_id
WHERE u.tenant_id = 42
  AND (COALESCE(COALESCE(a.a0, 0) = 0::bigint, FALSE))
