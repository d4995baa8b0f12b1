WITH s0 AS (
  SELECT COALESCE(l.user_id, r.user_id) AS user_id, SUM(r.events)::bigint AS events, MAX(r.last_at) AS last_at
  FROM warehouse.user_event_stats r
    LEFT JOIN identity_links l ON l.tenant_id = $1 AND l.anonymous_id = r.user_id
  WHERE r.tenant_id = $1 AND r.event_type = $2::text
  GROUP BY 1
),
a AS (
  SELECT COALESCE(l.user_id, e.user_id) AS user_id,
    SUM(warehouse.jnum(e.payload -> $5::text)) FILTER (WHERE e.event_type = $6::text AND e.occurred_at >= $4::timestamptz) AS a0
  FROM warehouse.events e
    LEFT JOIN identity_links l ON l.tenant_id = $1 AND l.anonymous_id = e.user_id
  WHERE e.tenant_id = $1
    AND e.event_type = ANY($8::text[])
    AND e.occurred_at >= $4::timestamptz
  GROUP BY 1
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
  SELECT COALESCE(l.user_id, r.user_id) AS user_id, SUM(r.events)::bigint AS events, MAX(r.last_at) AS last_at
  FROM warehouse.user_event_stats r
    LEFT JOIN identity_links l ON l.tenant_id = 42 AND l.anonymous_id = r.user_id
  WHERE r.tenant_id = 42 AND r.event_type = 'page_view'::text
  GROUP BY 1
),
a AS (
  SELECT COALESCE(l.user_id, e.user_id) AS user_id,
    SUM(warehouse.jnum(e.payload -> 'amount'::text)) FILTER (WHERE e.event_type = 'order_completed'::text AND e.occurred_at >= '2026-10-22 12:00:00Z'::timestamptz) AS a0
  FROM warehouse.events e
    LEFT JOIN identity_links l ON l.tenant_id = 42 AND l.anonymous_id = e.user_id
  WHERE e.tenant_id = 42
    AND e.event_type = ANY(ARRAY['order_completed']::text[])
    AND e.occurred_at >= '2026-10-22 12:00:00Z'::timestamptz
  GROUP BY 1
)
SELECT user_id
FROM s0
  JOIN a USING (user_id)
WHERE (COALESCE(s0.last_at >= '2026-11-14 12:00:00Z'::timestamptz, FALSE) AND COALESCE(COALESCE(a.a0, 0) > 0::numeric, FALSE))
