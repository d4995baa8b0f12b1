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
WHERE (COALESCE((u.traits -> $2::text #>> '{}') = $3::text, FALSE) OR COALESCE((u.traits -> $2::text #>> '{}') IS DISTINCT FROM $4::text, FALSE) OR COALESCE(STRPOS(LOWER((u.traits -> $5::text #>> '{}')), LOWER($6::text)) > 0, FALSE) OR COALESCE(STARTS_WITH(LOWER((u.traits -> $7::text #>> '{}')), LOWER($8::text)), FALSE) OR COALESCE((u.traits -> $7::text #>> '{}') = ANY($9::text[]), FALSE) OR COALESCE(jsonb_typeof(u.traits -> $10::text) <> 'null', FALSE) OR COALESCE(NOT COALESCE(jsonb_typeof(u.traits -> $2::text) <> 'null', FALSE), FALSE) OR COALESCE(warehouse.jnum(u.traits -> $11::text) > $12::numeric, FALSE) OR COALESCE(warehouse.jnum(u.traits -> $11::text) < $13::numeric, FALSE) OR COALESCE((u.traits -> $10::text #>> '{}') = $14::text, FALSE))
-- params:
-- $1 = int64(42)
-- $2 = string("plan")
-- $3 = string("pro")
-- $4 = string("free")
-- $5 = string("email")
-- $6 = string("@example.com")
-- $7 = string("country")
-- $8 = string("u")
-- $9 = []string{"DE", "FR"}
-- $10 = string("vip")
-- $11 = string("age")
-- $12 = float64(50)
-- $13 = float64(30)
-- $14 = string("true")
-- display:
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
WHERE (COALESCE((u.traits -> 'plan'::text #>> '{}') = 'pro'::text, FALSE) OR COALESCE((u.traits -> 'plan'::text #>> '{}') IS DISTINCT FROM 'free'::text, FALSE) OR COALESCE(STRPOS(LOWER((u.traits -> 'email'::text #>> '{}')), LOWER('@example.com'::text)) > 0, FALSE) OR COALESCE(STARTS_WITH(LOWER((u.traits -> 'country'::text #>> '{}')), LOWER('u'::text)), FALSE) OR COALESCE((u.traits -> 'country'::text #>> '{}') = ANY(ARRAY['DE', 'FR']::text[]), FALSE) OR COALESCE(jsonb_typeof(u.traits -> 'vip'::text) <> 'null', FALSE) OR COALESCE(NOT COALESCE(jsonb_typeof(u.traits -> 'plan'::text) <> 'null', FALSE), FALSE) OR COALESCE(warehouse.jnum(u.traits -> 'age'::text) > 50::numeric, FALSE) OR COALESCE(warehouse.jnum(u.traits -> 'age'::text) < 30::numeric, FALSE) OR COALESCE((u.traits -> 'vip'::text #>> '{}') = 'true'::text, FALSE))
