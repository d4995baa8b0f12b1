WITH s0 AS (
  SELECT user_id, n, total, min, max FROM warehouse.user_property_stats WHERE tenant_id = $1 AND event_type = $7::text AND property = $8::text
),
a AS (
  SELECT e.user_id,
    BOOL_OR(COALESCE((e.payload -> $2::text #>> '{}') = $3::text, FALSE)) FILTER (WHERE e.event_type = $4::text) AS a0
  FROM warehouse.events e
  WHERE e.tenant_id = $1
    AND e.event_type = ANY($12::text[])
  GROUP BY e.user_id
)
SELECT u.user_id
FROM profiles u
  LEFT JOIN s0 ON s0.user_id = u.user_id
  LEFT JOIN a ON a.user_id = u.user_id
WHERE u.tenant_id = $1
  AND (COALESCE(a.a0, FALSE) OR COALESCE((u.traits -> $5::text #>> '{}') = ANY($6::text[]), FALSE) OR COALESCE(COALESCE(s0.total, 0) > $9::numeric, FALSE) OR COALESCE(STRPOS(LOWER((u.traits -> $10::text #>> '{}')), LOWER($11::text)) > 0, FALSE))
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
  SELECT user_id, n, total, min, max FROM warehouse.user_property_stats WHERE tenant_id = 42 AND event_type = '*/ SELECT 1 /*'::text AND property = '{a,b}'::text
),
a AS (
  SELECT e.user_id,
    BOOL_OR(COALESCE((e.payload -> 'amount" OR 1=1 --'::text #>> '{}') = 'O''Brien \'' $1 @p0'::text, FALSE)) FILTER (WHERE e.event_type = 'order''); DROP TABLE profiles; --'::text) AS a0
  FROM warehouse.events e
  WHERE e.tenant_id = 42
    AND e.event_type = ANY(ARRAY['order''); DROP TABLE profiles; --']::text[])
  GROUP BY e.user_id
)
SELECT u.user_id
FROM profiles u
  LEFT JOIN s0 ON s0.user_id = u.user_id
  LEFT JOIN a ON a.user_id = u.user_id
WHERE u.tenant_id = 42
  AND (COALESCE(a.a0, FALSE) OR COALESCE((u.traits -> '$1'::text #>> '{}') = ANY(ARRAY['a''b', 'c\d', 'line
break', '@seg3', ''' OR ''''=''']::text[]), FALSE) OR COALESCE(COALESCE(s0.total, 0) > 1::numeric, FALSE) OR COALESCE(STRPOS(LOWER((u.traits -> 'plan'' || '''::text #>> '{}')), LOWER('%_\'::text)) > 0, FALSE))
