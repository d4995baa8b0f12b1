WITH s0 AS (
  SELECT COALESCE(l.user_id, r.user_id) AS user_id, SUM(r.n)::bigint AS n, SUM(r.total) AS total, MIN(r.min) AS min, MAX(r.max) AS max
  FROM warehouse.user_property_stats r
    LEFT JOIN identity_links l ON l.tenant_id = $1 AND l.anonymous_id = r.user_id
  WHERE r.tenant_id = $1 AND r.event_type = $2::text AND r.property = $3::text
  GROUP BY 1
),
s1 AS (
  SELECT COALESCE(l.user_id, r.user_id) AS user_id, SUM(r.events)::bigint AS events, MAX(r.last_at) AS last_at
  FROM warehouse.user_event_stats r
    LEFT JOIN identity_links l ON l.tenant_id = $1 AND l.anonymous_id = r.user_id
  WHERE r.tenant_id = $1 AND r.event_type = $5::text
  GROUP BY 1
)
SELECT u.user_id
FROM (
  SELECT p.user_id, p.traits FROM profiles p
  WHERE p.tenant_id = $1
    AND NOT EXISTS (SELECT 1 FROM identity_links x WHERE x.tenant_id = $1 AND x.anonymous_id = p.user_id)
  UNION ALL
  (SELECT DISTINCT ON (l.user_id) l.user_id, p.traits
  FROM identity_links l JOIN profiles p ON p.tenant_id = l.tenant_id AND p.user_id = l.anonymous_id
  WHERE l.tenant_id = $1
    AND NOT EXISTS (SELECT 1 FROM profiles o WHERE o.tenant_id = $1 AND o.user_id = l.user_id)
  ORDER BY l.user_id, p.last_seen_at DESC)
) u
  LEFT JOIN s0 ON s0.user_id = u.user_id
  LEFT JOIN s1 ON s1.user_id = u.user_id
WHERE NOT (COALESCE(s0.total / NULLIF(s0.n, 0) > $4::numeric, FALSE) OR COALESCE(s1.last_at > $6::timestamptz, FALSE))
-- params:
-- $1 = int64(42)
-- $2 = string("order_completed")
-- $3 = string("amount")
-- $4 = float64(50)
-- $5 = string("page_view")
-- $6 = time.Time(2026-11-14T12:00:00Z)
-- display:
WITH s0 AS (
  SELECT COALESCE(l.user_id, r.user_id) AS user_id, SUM(r.n)::bigint AS n, SUM(r.total) AS total, MIN(r.min) AS min, MAX(r.max) AS max
  FROM warehouse.user_property_stats r
    LEFT JOIN identity_links l ON l.tenant_id = 42 AND l.anonymous_id = r.user_id
  WHERE r.tenant_id = 42 AND r.event_type = 'order_completed'::text AND r.property = 'amount'::text
  GROUP BY 1
),
s1 AS (
  SELECT COALESCE(l.user_id, r.user_id) AS user_id, SUM(r.events)::bigint AS events, MAX(r.last_at) AS last_at
  FROM warehouse.user_event_stats r
    LEFT JOIN identity_links l ON l.tenant_id = 42 AND l.anonymous_id = r.user_id
  WHERE r.tenant_id = 42 AND r.event_type = 'page_view'::text
  GROUP BY 1
)
SELECT u.user_id
FROM (
  SELECT p.user_id, p.traits FROM profiles p
  WHERE p.tenant_id = 42
    AND NOT EXISTS (SELECT 1 FROM identity_links x WHERE x.tenant_id = 42 AND x.anonymous_id = p.user_id)
  UNION ALL
  (SELECT DISTINCT ON (l.user_id) l.user_id, p.traits
  FROM identity_links l JOIN profiles p ON p.tenant_id = l.tenant_id AND p.user_id = l.anonymous_id
  WHERE l.tenant_id = 42
    AND NOT EXISTS (SELECT 1 FROM profiles o WHERE o.tenant_id = 42 AND o.user_id = l.user_id)
  ORDER BY l.user_id, p.last_seen_at DESC)
) u
  LEFT JOIN s0 ON s0.user_id = u.user_id
  LEFT JOIN s1 ON s1.user_id = u.user_id
WHERE NOT (COALESCE(s0.total / NULLIF(s0.n, 0) > 50::numeric, FALSE) OR COALESCE(s1.last_at > '2026-11-14 12:00:00Z'::timestamptz, FALSE))
