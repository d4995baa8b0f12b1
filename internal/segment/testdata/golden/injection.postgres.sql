WITH s0 AS (
  SELECT COALESCE(l.user_id, r.user_id) AS user_id, SUM(r.n)::bigint AS n, SUM(r.total) AS total, MIN(r.min) AS min, MAX(r.max) AS max
  FROM warehouse.user_property_stats r
    LEFT JOIN identity_links l ON l.tenant_id = $1 AND l.anonymous_id = r.user_id
  WHERE r.tenant_id = $1 AND r.event_type = $7::text AND r.property = $8::text
  GROUP BY 1
),
a AS (
  SELECT COALESCE(l.user_id, e.user_id) AS user_id,
    BOOL_OR(COALESCE((e.payload -> $2::text #>> '{}') = $3::text, FALSE)) FILTER (WHERE e.event_type = $4::text) AS a0
  FROM warehouse.events e
    LEFT JOIN identity_links l ON l.tenant_id = $1 AND l.anonymous_id = e.user_id
  WHERE e.tenant_id = $1
    AND e.event_type = ANY($12::text[])
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
WHERE (COALESCE(a.a0, FALSE) OR COALESCE((u.traits -> $5::text #>> '{}') = ANY($6::text[]), FALSE) OR COALESCE(COALESCE(s0.total, 0) > $9::numeric, FALSE) OR COALESCE(STRPOS(LOWER((u.traits -> $10::text #>> '{}')), LOWER($11::text)) > 0, FALSE))
-- params:
-- $1 = int64(42)
-- $2 = string("amount\" OR 1=1 --")
-- $3 = string("O'Brien \\' $1 @p0")
-- $4 = string("order'); DROP TABLE profiles; --")
-- $5 = string("$1")
-- $6 = []string{"a'b", "c\\d", "line\nbreak", "@seg3", "' OR ''='"}
-- $7 = string("*/ SELECT 1 /*")
-- $8 = string("{a,b}")
-- $9 = float64(1)
-- $10 = string("plan' || '")
-- $11 = string("%_\\")
-- $12 = []string{"order'); DROP TABLE profiles; --"}
-- display:
WITH s0 AS (
  SELECT COALESCE(l.user_id, r.user_id) AS user_id, SUM(r.n)::bigint AS n, SUM(r.total) AS total, MIN(r.min) AS min, MAX(r.max) AS max
  FROM warehouse.user_property_stats r
    LEFT JOIN identity_links l ON l.tenant_id = 42 AND l.anonymous_id = r.user_id
  WHERE r.tenant_id = 42 AND r.event_type = '*/ SELECT 1 /*'::text AND r.property = '{a,b}'::text
  GROUP BY 1
),
a AS (
  SELECT COALESCE(l.user_id, e.user_id) AS user_id,
    BOOL_OR(COALESCE((e.payload -> 'amount" OR 1=1 --'::text #>> '{}') = 'O''Brien \'' $1 @p0'::text, FALSE)) FILTER (WHERE e.event_type = 'order''); DROP TABLE profiles; --'::text) AS a0
  FROM warehouse.events e
    LEFT JOIN identity_links l ON l.tenant_id = 42 AND l.anonymous_id = e.user_id
  WHERE e.tenant_id = 42
    AND e.event_type = ANY(ARRAY['order''); DROP TABLE profiles; --']::text[])
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
WHERE (COALESCE(a.a0, FALSE) OR COALESCE((u.traits -> '$1'::text #>> '{}') = ANY(ARRAY['a''b', 'c\d', 'line
break', '@seg3', ''' OR ''''=''']::text[]), FALSE) OR COALESCE(COALESCE(s0.total, 0) > 1::numeric, FALSE) OR COALESCE(STRPOS(LOWER((u.traits -> 'plan'' || '''::text #>> '{}')), LOWER('%_\'::text)) > 0, FALSE))
