WITH s0 AS (
  SELECT COALESCE(l.user_id, r.user_id) AS user_id, SUM(r.events)::bigint AS events, MAX(r.last_at) AS last_at
  FROM warehouse.user_event_stats r
    LEFT JOIN identity_links l ON l.tenant_id = $1 AND l.anonymous_id = r.user_id
  WHERE r.tenant_id = $1 AND r.event_type = $2::text
  GROUP BY 1
),
s1 AS (
  SELECT COALESCE(l.user_id, r.user_id) AS user_id, SUM(r.events)::bigint AS events, MAX(r.last_at) AS last_at
  FROM warehouse.user_event_stats r
    LEFT JOIN identity_links l ON l.tenant_id = $1 AND l.anonymous_id = r.user_id
  WHERE r.tenant_id = $1 AND r.event_type = $4::text
  GROUP BY 1
),
s2 AS (
  SELECT COALESCE(l.user_id, r.user_id) AS user_id, SUM(r.events)::bigint AS events, MAX(r.last_at) AS last_at
  FROM warehouse.user_event_stats r
    LEFT JOIN identity_links l ON l.tenant_id = $1 AND l.anonymous_id = r.user_id
  WHERE r.tenant_id = $1 AND r.event_type = $7::text
  GROUP BY 1
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
  SELECT COALESCE(l.user_id, r.user_id) AS user_id, SUM(r.events)::bigint AS events, MAX(r.last_at) AS last_at
  FROM warehouse.user_event_stats r
    LEFT JOIN identity_links l ON l.tenant_id = 42 AND l.anonymous_id = r.user_id
  WHERE r.tenant_id = 42 AND r.event_type = 'page_view'::text
  GROUP BY 1
),
s1 AS (
  SELECT COALESCE(l.user_id, r.user_id) AS user_id, SUM(r.events)::bigint AS events, MAX(r.last_at) AS last_at
  FROM warehouse.user_event_stats r
    LEFT JOIN identity_links l ON l.tenant_id = 42 AND l.anonymous_id = r.user_id
  WHERE r.tenant_id = 42 AND r.event_type = 'order_completed'::text
  GROUP BY 1
),
s2 AS (
  SELECT COALESCE(l.user_id, r.user_id) AS user_id, SUM(r.events)::bigint AS events, MAX(r.last_at) AS last_at
  FROM warehouse.user_event_stats r
    LEFT JOIN identity_links l ON l.tenant_id = 42 AND l.anonymous_id = r.user_id
  WHERE r.tenant_id = 42 AND r.event_type = 'signup'::text
  GROUP BY 1
)
SELECT user_id
FROM s0
  FULL JOIN s1 USING (user_id)
  FULL JOIN s2 USING (user_id)
WHERE (COALESCE(s0.last_at < '2026-10-22 12:00:00Z'::timestamptz, FALSE) OR COALESCE(s0.last_at <= '2026-10-22 12:00:00Z'::timestamptz, FALSE) OR COALESCE(s1.last_at > '2026-11-14 12:00:00Z'::timestamptz, FALSE) OR COALESCE(s1.last_at >= '2026-11-21 12:00:00Z'::timestamptz, FALSE) OR COALESCE((s2.last_at <= '2026-10-22 12:00:00Z'::timestamptz AND s2.last_at > '2026-10-21 12:00:00Z'::timestamptz), FALSE) OR COALESCE((s2.last_at > '2026-11-20 12:00:00Z'::timestamptz OR s2.last_at <= '2026-11-19 12:00:00Z'::timestamptz), FALSE))
