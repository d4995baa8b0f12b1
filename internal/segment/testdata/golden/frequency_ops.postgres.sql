WITH s0 AS (
  SELECT COALESCE(l.user_id, r.user_id) AS user_id, SUM(r.events)::bigint AS events, MAX(r.last_at) AS last_at
  FROM warehouse.user_event_stats r
    LEFT JOIN identity_links l ON l.tenant_id = $1 AND l.anonymous_id = r.user_id
  WHERE r.tenant_id = $1 AND r.event_type = $9::text
  GROUP BY 1
),
s1 AS (
  SELECT COALESCE(l.user_id, r.user_id) AS user_id, SUM(r.events)::bigint AS events, MAX(r.last_at) AS last_at
  FROM warehouse.user_event_stats r
    LEFT JOIN identity_links l ON l.tenant_id = $1 AND l.anonymous_id = r.user_id
  WHERE r.tenant_id = $1 AND r.event_type = $3::text
  GROUP BY 1
),
a AS (
  SELECT COALESCE(l.user_id, e.user_id) AS user_id,
    COUNT(*) FILTER (WHERE e.event_type = $3::text AND e.occurred_at >= $2::timestamptz) AS a0,
    COUNT(*) FILTER (WHERE e.event_type = $7::text AND e.occurred_at >= $5::timestamptz AND e.occurred_at < $6::timestamptz) AS a1
  FROM warehouse.events e
    LEFT JOIN identity_links l ON l.tenant_id = $1 AND l.anonymous_id = e.user_id
  WHERE e.tenant_id = $1
    AND e.event_type = ANY($12::text[])
    AND e.occurred_at >= $5::timestamptz
  GROUP BY 1
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
  SELECT COALESCE(l.user_id, r.user_id) AS user_id, SUM(r.events)::bigint AS events, MAX(r.last_at) AS last_at
  FROM warehouse.user_event_stats r
    LEFT JOIN identity_links l ON l.tenant_id = 42 AND l.anonymous_id = r.user_id
  WHERE r.tenant_id = 42 AND r.event_type = 'signup'::text
  GROUP BY 1
),
s1 AS (
  SELECT COALESCE(l.user_id, r.user_id) AS user_id, SUM(r.events)::bigint AS events, MAX(r.last_at) AS last_at
  FROM warehouse.user_event_stats r
    LEFT JOIN identity_links l ON l.tenant_id = 42 AND l.anonymous_id = r.user_id
  WHERE r.tenant_id = 42 AND r.event_type = 'page_view'::text
  GROUP BY 1
),
a AS (
  SELECT COALESCE(l.user_id, e.user_id) AS user_id,
    COUNT(*) FILTER (WHERE e.event_type = 'page_view'::text AND e.occurred_at >= '2026-10-22 12:00:00Z'::timestamptz) AS a0,
    COUNT(*) FILTER (WHERE e.event_type = 'order_completed'::text AND e.occurred_at >= '2026-10-07 12:00:00Z'::timestamptz AND e.occurred_at < '2026-11-21 12:00:00Z'::timestamptz) AS a1
  FROM warehouse.events e
    LEFT JOIN identity_links l ON l.tenant_id = 42 AND l.anonymous_id = e.user_id
  WHERE e.tenant_id = 42
    AND e.event_type = ANY(ARRAY['page_view', 'order_completed']::text[])
    AND e.occurred_at >= '2026-10-07 12:00:00Z'::timestamptz
  GROUP BY 1
)
SELECT user_id
FROM a
  LEFT JOIN s0 USING (user_id)
  LEFT JOIN s1 USING (user_id)
WHERE (COALESCE(COALESCE(a.a0, 0) >= 2::bigint, FALSE) AND COALESCE(COALESCE(a.a1, 0) < 3::bigint, FALSE) AND COALESCE(COALESCE(s0.events, 0) <> 1::bigint, FALSE) AND COALESCE(COALESCE(s1.events, 0) <= 10::bigint, FALSE))
