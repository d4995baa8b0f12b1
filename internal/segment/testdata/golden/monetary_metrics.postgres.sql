WITH s0 AS (
  SELECT COALESCE(l.user_id, r.user_id) AS user_id, SUM(r.n)::bigint AS n, SUM(r.total) AS total, MIN(r.min) AS min, MAX(r.max) AS max
  FROM warehouse.user_property_stats r
    LEFT JOIN identity_links l ON l.tenant_id = $1 AND l.anonymous_id = r.user_id
  WHERE r.tenant_id = $1 AND r.event_type = $4::text AND r.property = $3::text
  GROUP BY 1
),
s1 AS (
  SELECT COALESCE(l.user_id, r.user_id) AS user_id, SUM(r.n)::bigint AS n, SUM(r.total) AS total, MIN(r.min) AS min, MAX(r.max) AS max
  FROM warehouse.user_property_stats r
    LEFT JOIN identity_links l ON l.tenant_id = $1 AND l.anonymous_id = r.user_id
  WHERE r.tenant_id = $1 AND r.event_type = $4::text AND r.property = $10::text
  GROUP BY 1
),
a AS (
  SELECT COALESCE(l.user_id, e.user_id) AS user_id,
    SUM(warehouse.jnum(e.payload -> $3::text)) FILTER (WHERE e.event_type = $4::text AND e.occurred_at >= $2::timestamptz) AS a0,
    AVG(warehouse.jnum(e.payload -> $3::text)) FILTER (WHERE e.event_type = $4::text AND e.occurred_at >= $2::timestamptz AND e.occurred_at < $6::timestamptz) AS a1,
    MAX(warehouse.jnum(e.payload -> $3::text)) FILTER (WHERE e.event_type = $4::text AND e.occurred_at >= $9::timestamptz) AS a2
  FROM warehouse.events e
    LEFT JOIN identity_links l ON l.tenant_id = $1 AND l.anonymous_id = e.user_id
  WHERE e.tenant_id = $1
    AND e.event_type = ANY($12::text[])
    AND e.occurred_at >= $9::timestamptz
  GROUP BY 1
)
SELECT user_id
FROM s0
  FULL JOIN s1 USING (user_id)
  FULL JOIN a USING (user_id)
WHERE (COALESCE(COALESCE(a.a0, 0) > $5::numeric, FALSE) OR COALESCE(a.a1 >= $7::numeric, FALSE) OR COALESCE(s0.min < $8::numeric, FALSE) OR COALESCE(a.a2 <= $5::numeric, FALSE) OR COALESCE(COALESCE(s1.n, 0) = $11::numeric, FALSE) OR COALESCE(COALESCE(a.a0, 0) <> $8::numeric, FALSE))
-- params:
-- $1 = int64(42)
-- $2 = time.Time(2026-10-22T12:00:00Z)
-- $3 = string("amount")
-- $4 = string("order_completed")
-- $5 = float64(100)
-- $6 = time.Time(2026-11-14T12:00:00Z)
-- $7 = float64(50.5)
-- $8 = float64(0)
-- $9 = time.Time(2026-08-23T12:00:00Z)
-- $10 = string("qty")
-- $11 = float64(2)
-- $12 = []string{"order_completed"}
-- display:
WITH s0 AS (
  SELECT COALESCE(l.user_id, r.user_id) AS user_id, SUM(r.n)::bigint AS n, SUM(r.total) AS total, MIN(r.min) AS min, MAX(r.max) AS max
  FROM warehouse.user_property_stats r
    LEFT JOIN identity_links l ON l.tenant_id = 42 AND l.anonymous_id = r.user_id
  WHERE r.tenant_id = 42 AND r.event_type = 'order_completed'::text AND r.property = 'amount'::text
  GROUP BY 1
),
s1 AS (
  SELECT COALESCE(l.user_id, r.user_id) AS user_id, SUM(r.n)::bigint AS n, SUM(r.total) AS total, MIN(r.min) AS min, MAX(r.max) AS max
  FROM warehouse.user_property_stats r
    LEFT JOIN identity_links l ON l.tenant_id = 42 AND l.anonymous_id = r.user_id
  WHERE r.tenant_id = 42 AND r.event_type = 'order_completed'::text AND r.property = 'qty'::text
  GROUP BY 1
),
a AS (
  SELECT COALESCE(l.user_id, e.user_id) AS user_id,
    SUM(warehouse.jnum(e.payload -> 'amount'::text)) FILTER (WHERE e.event_type = 'order_completed'::text AND e.occurred_at >= '2026-10-22 12:00:00Z'::timestamptz) AS a0,
    AVG(warehouse.jnum(e.payload -> 'amount'::text)) FILTER (WHERE e.event_type = 'order_completed'::text AND e.occurred_at >= '2026-10-22 12:00:00Z'::timestamptz AND e.occurred_at < '2026-11-14 12:00:00Z'::timestamptz) AS a1,
    MAX(warehouse.jnum(e.payload -> 'amount'::text)) FILTER (WHERE e.event_type = 'order_completed'::text AND e.occurred_at >= '2026-08-23 12:00:00Z'::timestamptz) AS a2
  FROM warehouse.events e
    LEFT JOIN identity_links l ON l.tenant_id = 42 AND l.anonymous_id = e.user_id
  WHERE e.tenant_id = 42
    AND e.event_type = ANY(ARRAY['order_completed']::text[])
    AND e.occurred_at >= '2026-08-23 12:00:00Z'::timestamptz
  GROUP BY 1
)
SELECT user_id
FROM s0
  FULL JOIN s1 USING (user_id)
  FULL JOIN a USING (user_id)
WHERE (COALESCE(COALESCE(a.a0, 0) > 100::numeric, FALSE) OR COALESCE(a.a1 >= 50.5::numeric, FALSE) OR COALESCE(s0.min < 0::numeric, FALSE) OR COALESCE(a.a2 <= 100::numeric, FALSE) OR COALESCE(COALESCE(s1.n, 0) = 2::numeric, FALSE) OR COALESCE(COALESCE(a.a0, 0) <> 0::numeric, FALSE))
