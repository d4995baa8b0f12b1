SELECT u.user_id
FROM profiles u
WHERE u.tenant_id = $1
  AND (COALESCE((u.traits -> $2::text #>> '{}') = $3::text, FALSE) OR COALESCE((u.traits -> $2::text #>> '{}') IS DISTINCT FROM $4::text, FALSE) OR COALESCE(STRPOS(LOWER((u.traits -> $5::text #>> '{}')), LOWER($6::text)) > 0, FALSE) OR COALESCE(STARTS_WITH(LOWER((u.traits -> $7::text #>> '{}')), LOWER($8::text)), FALSE) OR COALESCE((u.traits -> $7::text #>> '{}') = ANY($9::text[]), FALSE) OR COALESCE(jsonb_typeof(u.traits -> $10::text) <> 'null', FALSE) OR COALESCE(NOT COALESCE(jsonb_typeof(u.traits -> $2::text) <> 'null', FALSE), FALSE) OR COALESCE(warehouse.jnum(u.traits -> $11::text) > $12::numeric, FALSE) OR COALESCE(warehouse.jnum(u.traits -> $11::text) < $13::numeric, FALSE) OR COALESCE((u.traits -> $10::text #>> '{}') = $14::text, FALSE))
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
FROM profiles u
WHERE u.tenant_id = 42
  AND (COALESCE((u.traits -> 'plan'::text #>> '{}') = 'pro'::text, FALSE) OR COALESCE((u.traits -> 'plan'::text #>> '{}') IS DISTINCT FROM 'free'::text, FALSE) OR COALESCE(STRPOS(LOWER((u.traits -> 'email'::text #>> '{}')), LOWER('@example.com'::text)) > 0, FALSE) OR COALESCE(STARTS_WITH(LOWER((u.traits -> 'country'::text #>> '{}')), LOWER('u'::text)), FALSE) OR COALESCE((u.traits -> 'country'::text #>> '{}') = ANY(ARRAY['DE', 'FR']::text[]), FALSE) OR COALESCE(jsonb_typeof(u.traits -> 'vip'::text) <> 'null', FALSE) OR COALESCE(NOT COALESCE(jsonb_typeof(u.traits -> 'plan'::text) <> 'null', FALSE), FALSE) OR COALESCE(warehouse.jnum(u.traits -> 'age'::text) > 50::numeric, FALSE) OR COALESCE(warehouse.jnum(u.traits -> 'age'::text) < 30::numeric, FALSE) OR COALESCE((u.traits -> 'vip'::text #>> '{}') = 'true'::text, FALSE))
