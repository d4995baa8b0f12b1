WITH s0 AS (
  SELECT COALESCE(l.user_id, r.user_id) AS user_id, SUM(r.n)::bigint AS n, SUM(r.total) AS total, MIN(r.min) AS min, MAX(r.max) AS max
  FROM warehouse.user_property_stats r
    LEFT JOIN identity_links l ON l.tenant_id = $1 AND l.anonymous_id = r.user_id
  WHERE r.tenant_id = $1 AND r.event_type = $2::text AND r.property = $3::text
  GROUP BY 1
),
a AS (
  SELECT COALESCE(l.user_id, e.user_id) AS user_id,
    COUNT(*) FILTER (WHERE e.event_type = $10::text AND e.occurred_at >= $9::timestamptz) AS a0,
    COUNT(*) FILTER (WHERE e.event_type = $10::text AND e.occurred_at >= $12::timestamptz) AS a1,
    BOOL_OR(COALESCE(STARTS_WITH(LOWER((e.payload -> $14::text #>> '{}')), LOWER($15::text)), FALSE)) FILTER (WHERE e.event_type = $10::text) AS a2
  FROM warehouse.events e
    LEFT JOIN identity_links l ON l.tenant_id = $1 AND l.anonymous_id = e.user_id
  WHERE e.tenant_id = $1
    AND e.event_type = ANY($16::text[])
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
  LEFT JOIN a ON a.user_id = u.user_id
WHERE ((COALESCE(COALESCE(s0.total, 0) >= $4::numeric, FALSE) AND (COALESCE((u.traits -> $5::text #>> '{}') = $6::text, FALSE) OR COALESCE((u.traits -> $7::text #>> '{}') = $8::text, FALSE) OR NOT (COALESCE(COALESCE(a.a0, 0) > $11::bigint, FALSE)))) OR (COALESCE(COALESCE(a.a1, 0) >= $13::bigint, FALSE) AND NOT COALESCE(a.a2, FALSE)))
-- params:
-- $1 = int64(42)
-- $2 = string("order_completed")
-- $3 = string("amount")
-- $4 = float64(100)
-- $5 = string("plan")
-- $6 = string("pro")
-- $7 = string("vip")
-- $8 = string("true")
-- $9 = time.Time(2026-10-22T12:00:00Z)
-- $10 = string("page_view")
-- $11 = int64(0)
-- $12 = time.Time(2026-11-14T12:00:00Z)
-- $13 = int64(2)
-- $14 = string("path")
-- $15 = string("/pricing")
-- $16 = []string{"page_view"}
-- display:
WITH s0 AS (
  SELECT COALESCE(l.user_id, r.user_id) AS user_id, SUM(r.n)::bigint AS n, SUM(r.total) AS total, MIN(r.min) AS min, MAX(r.max) AS max
  FROM warehouse.user_property_stats r
    LEFT JOIN identity_links l ON l.tenant_id = 42 AND l.anonymous_id = r.user_id
  WHERE r.tenant_id = 42 AND r.event_type = 'order_completed'::text AND r.property = 'amount'::text
  GROUP BY 1
),
a AS (
  SELECT COALESCE(l.user_id, e.user_id) AS user_id,
    COUNT(*) FILTER (WHERE e.event_type = 'page_view'::text AND e.occurred_at >= '2026-10-22 12:00:00Z'::timestamptz) AS a0,
    COUNT(*) FILTER (WHERE e.event_type = 'page_view'::text AND e.occurred_at >= '2026-11-14 12:00:00Z'::timestamptz) AS a1,
    BOOL_OR(COALESCE(STARTS_WITH(LOWER((e.payload -> 'path'::text #>> '{}')), LOWER('/pricing'::text)), FALSE)) FILTER (WHERE e.event_type = 'page_view'::text) AS a2
  FROM warehouse.events e
    LEFT JOIN identity_links l ON l.tenant_id = 42 AND l.anonymous_id = e.user_id
  WHERE e.tenant_id = 42
    AND e.event_type = ANY(ARRAY['page_view']::text[])
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
  LEFT JOIN a ON a.user_id = u.user_id
WHERE ((COALESCE(COALESCE(s0.total, 0) >= 100::numeric, FALSE) AND (COALESCE((u.traits -> 'plan'::text #>> '{}') = 'pro'::text, FALSE) OR COALESCE((u.traits -> 'vip'::text #>> '{}') = 'true'::text, FALSE) OR NOT (COALESCE(COALESCE(a.a0, 0) > 0::bigint, FALSE)))) OR (COALESCE(COALESCE(a.a1, 0) >= 2::bigint, FALSE) AND NOT COALESCE(a.a2, FALSE)))
