WITH s0 AS (
  SELECT user_id, n, total, min, max FROM warehouse.user_property_stats WHERE tenant_id = $1 AND event_type = $2::text AND property = $3::text
),
a AS (
  SELECT e.user_id,
    COUNT(*) FILTER (WHERE e.event_type = $10::text AND e.occurred_at >= $9::timestamptz) AS a0,
    COUNT(*) FILTER (WHERE e.event_type = $10::text AND e.occurred_at >= $12::timestamptz) AS a1,
    BOOL_OR(COALESCE(STARTS_WITH(LOWER((e.payload -> $14::text #>> '{}')), LOWER($15::text)), FALSE)) FILTER (WHERE e.event_type = $10::text) AS a2
  FROM warehouse.events e
  WHERE e.tenant_id = $1
    AND e.event_type = ANY($16::text[])
  GROUP BY e.user_id
)
SELECT u.user_id
FROM profiles u
  LEFT JOIN s0 ON s0.user_id = u.user_id
  LEFT JOIN a ON a.user_id = u.user_id
WHERE u.tenant_id = $1
  AND ((COALESCE(COALESCE(s0.total, 0) >= $4::numeric, FALSE) AND (COALESCE((u.traits -> $5::text #>> '{}') = $6::text, FALSE) OR COALESCE((u.traits -> $7::text #>> '{}') = $8::text, FALSE) OR NOT (COALESCE(COALESCE(a.a0, 0) > $11::bigint, FALSE)))) OR (COALESCE(COALESCE(a.a1, 0) >= $13::bigint, FALSE) AND NOT COALESCE(a.a2, FALSE)))
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
  SELECT user_id, n, total, min, max FROM warehouse.user_property_stats WHERE tenant_id = 42 AND event_type = 'order_completed'::text AND property = 'amount'::text
),
a AS (
  SELECT e.user_id,
    COUNT(*) FILTER (WHERE e.event_type = 'page_view'::text AND e.occurred_at >= '2026-10-22 12:00:00Z'::timestamptz) AS a0,
    COUNT(*) FILTER (WHERE e.event_type = 'page_view'::text AND e.occurred_at >= '2026-11-14 12:00:00Z'::timestamptz) AS a1,
    BOOL_OR(COALESCE(STARTS_WITH(LOWER((e.payload -> 'path'::text #>> '{}')), LOWER('/pricing'::text)), FALSE)) FILTER (WHERE e.event_type = 'page_view'::text) AS a2
  FROM warehouse.events e
  WHERE e.tenant_id = 42
    AND e.event_type = ANY(ARRAY['page_view']::text[])
  GROUP BY e.user_id
)
SELECT u.user_id
FROM profiles u
  LEFT JOIN s0 ON s0.user_id = u.user_id
  LEFT JOIN a ON a.user_id = u.user_id
WHERE u.tenant_id = 42
  AND ((COALESCE(COALESCE(s0.total, 0) >= 100::numeric, FALSE) AND (COALESCE((u.traits -> 'plan'::text #>> '{}') = 'pro'::text, FALSE) OR COALESCE((u.traits -> 'vip'::text #>> '{}') = 'true'::text, FALSE) OR NOT (COALESCE(COALESCE(a.a0, 0) > 0::bigint, FALSE)))) OR (COALESCE(COALESCE(a.a1, 0) >= 2::bigint, FALSE) AND NOT COALESCE(a.a2, FALSE)))
