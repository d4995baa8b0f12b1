WITH a AS (
  SELECT COALESCE(l.user_id, e.user_id) AS user_id,
    SUM(warehouse.jnum(e.payload -> $4::text)) FILTER (WHERE e.event_type = $5::text AND e.occurred_at >= $2::timestamptz AND e.occurred_at < $3::timestamptz) AS a0,
    SUM(warehouse.jnum(e.payload -> $4::text)) FILTER (WHERE e.event_type = $5::text AND e.occurred_at >= $7::timestamptz AND e.occurred_at < $2::timestamptz) AS a1,
    COUNT(*) FILTER (WHERE e.event_type = $9::text AND e.occurred_at >= $8::timestamptz AND e.occurred_at < $7::timestamptz) AS a2
  FROM warehouse.events e
    LEFT JOIN identity_links l ON l.tenant_id = $1 AND l.anonymous_id = e.user_id
  WHERE e.tenant_id = $1
    AND e.event_type = ANY($11::text[])
    AND e.occurred_at >= $8::timestamptz
  GROUP BY 1
)
SELECT user_id
FROM a
WHERE (COALESCE(COALESCE(a.a0, 0) >= $6::numeric, FALSE) OR COALESCE(COALESCE(a.a1, 0) >= $6::numeric, FALSE) OR COALESCE(COALESCE(a.a2, 0) > $10::bigint, FALSE))
-- params:
-- $1 = int64(42)
-- $2 = time.Time(2026-11-14T12:00:00Z)
-- $3 = time.Time(2026-11-21T12:00:00Z)
-- $4 = string("amount")
-- $5 = string("order_completed")
-- $6 = float64(50)
-- $7 = time.Time(2026-10-22T12:00:00Z)
-- $8 = time.Time(2026-08-23T12:00:00Z)
-- $9 = string("page_view")
-- $10 = int64(0)
-- $11 = []string{"order_completed", "page_view"}
-- display:
WITH a AS (
  SELECT COALESCE(l.user_id, e.user_id) AS user_id,
    SUM(warehouse.jnum(e.payload -> 'amount'::text)) FILTER (WHERE e.event_type = 'order_completed'::text AND e.occurred_at >= '2026-11-14 12:00:00Z'::timestamptz AND e.occurred_at < '2026-11-21 12:00:00Z'::timestamptz) AS a0,
    SUM(warehouse.jnum(e.payload -> 'amount'::text)) FILTER (WHERE e.event_type = 'order_completed'::text AND e.occurred_at >= '2026-10-22 12:00:00Z'::timestamptz AND e.occurred_at < '2026-11-14 12:00:00Z'::timestamptz) AS a1,
    COUNT(*) FILTER (WHERE e.event_type = 'page_view'::text AND e.occurred_at >= '2026-08-23 12:00:00Z'::timestamptz AND e.occurred_at < '2026-10-22 12:00:00Z'::timestamptz) AS a2
  FROM warehouse.events e
    LEFT JOIN identity_links l ON l.tenant_id = 42 AND l.anonymous_id = e.user_id
  WHERE e.tenant_id = 42
    AND e.event_type = ANY(ARRAY['order_completed', 'page_view']::text[])
    AND e.occurred_at >= '2026-08-23 12:00:00Z'::timestamptz
  GROUP BY 1
)
SELECT user_id
FROM a
WHERE (COALESCE(COALESCE(a.a0, 0) >= 50::numeric, FALSE) OR COALESCE(COALESCE(a.a1, 0) >= 50::numeric, FALSE) OR COALESCE(COALESCE(a.a2, 0) > 0::bigint, FALSE))
