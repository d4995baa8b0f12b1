WITH a AS (
  SELECT COALESCE(l.user_id, e.user_id) AS user_id,
    BOOL_OR(COALESCE((e.payload -> $3::text #>> '{}') = $4::text, FALSE)) FILTER (WHERE e.event_type = $5::text AND e.occurred_at >= $2::timestamptz) AS a0,
    BOOL_OR(COALESCE((e.payload -> $3::text #>> '{}') IS DISTINCT FROM $6::text, FALSE)) FILTER (WHERE e.event_type = $5::text) AS a1,
    BOOL_OR(COALESCE(STRPOS(LOWER((e.payload -> $3::text #>> '{}')), LOWER($9::text)) > 0, FALSE)) FILTER (WHERE e.event_type = $5::text AND e.occurred_at >= $7::timestamptz AND e.occurred_at < $8::timestamptz) AS a2,
    BOOL_OR(COALESCE(STARTS_WITH(LOWER((e.payload -> $3::text #>> '{}')), LOWER($10::text)), FALSE)) FILTER (WHERE e.event_type = $5::text) AS a3,
    BOOL_OR(COALESCE((e.payload -> $11::text #>> '{}') = ANY($12::text[]), FALSE)) FILTER (WHERE e.event_type = $13::text) AS a4,
    BOOL_OR(COALESCE(jsonb_typeof(e.payload -> $14::text) <> 'null', FALSE)) FILTER (WHERE e.event_type = $13::text) AS a5,
    BOOL_OR(COALESCE(warehouse.jnum(e.payload -> $15::text) > $16::numeric, FALSE)) FILTER (WHERE e.event_type = $13::text) AS a6,
    BOOL_OR(COALESCE(warehouse.jnum(e.payload -> $15::text) >= $17::numeric, FALSE)) FILTER (WHERE e.event_type = $13::text) AS a7,
    BOOL_OR(COALESCE(warehouse.jnum(e.payload -> $15::text) < $18::numeric, FALSE)) FILTER (WHERE e.event_type = $13::text) AS a8,
    BOOL_OR(COALESCE(warehouse.jnum(e.payload -> $19::text) <= $20::numeric, FALSE)) FILTER (WHERE e.event_type = $13::text) AS a9,
    BOOL_OR(COALESCE(warehouse.jnum(e.payload -> $15::text) = $21::numeric, FALSE)) FILTER (WHERE e.event_type = $13::text) AS a10,
    BOOL_OR(COALESCE((e.payload -> $22::text #>> '{}') = $23::text, FALSE)) FILTER (WHERE e.event_type = $13::text) AS a11
  FROM warehouse.events e
    LEFT JOIN identity_links l ON l.tenant_id = $1 AND l.anonymous_id = e.user_id
  WHERE e.tenant_id = $1
    AND e.event_type = ANY($24::text[])
  GROUP BY 1
)
SELECT user_id
FROM a
WHERE (COALESCE(a.a0, FALSE) OR COALESCE(a.a1, FALSE) OR COALESCE(a.a2, FALSE) OR COALESCE(a.a3, FALSE) OR COALESCE(a.a4, FALSE) OR COALESCE(a.a5, FALSE) OR COALESCE(a.a6, FALSE) OR COALESCE(a.a7, FALSE) OR COALESCE(a.a8, FALSE) OR COALESCE(a.a9, FALSE) OR COALESCE(a.a10, FALSE) OR COALESCE(a.a11, FALSE))
-- params:
-- $1 = int64(42)
-- $2 = time.Time(2026-11-14T12:00:00Z)
-- $3 = string("path")
-- $4 = string("/pricing")
-- $5 = string("page_view")
-- $6 = string("/home")
-- $7 = time.Time(2026-10-22T12:00:00Z)
-- $8 = time.Time(2026-11-20T12:00:00Z)
-- $9 = string("Pricing")
-- $10 = string("/blog")
-- $11 = string("currency")
-- $12 = []string{"EUR", "USD", "1", "true"}
-- $13 = string("order_completed")
-- $14 = string("coupon")
-- $15 = string("amount")
-- $16 = float64(150)
-- $17 = float64(12.5)
-- $18 = float64(-10)
-- $19 = string("qty")
-- $20 = float64(1)
-- $21 = float64(30.5)
-- $22 = string("gift")
-- $23 = string("true")
-- $24 = []string{"page_view", "order_completed"}
-- display:
WITH a AS (
  SELECT COALESCE(l.user_id, e.user_id) AS user_id,
    BOOL_OR(COALESCE((e.payload -> 'path'::text #>> '{}') = '/pricing'::text, FALSE)) FILTER (WHERE e.event_type = 'page_view'::text AND e.occurred_at >= '2026-11-14 12:00:00Z'::timestamptz) AS a0,
    BOOL_OR(COALESCE((e.payload -> 'path'::text #>> '{}') IS DISTINCT FROM '/home'::text, FALSE)) FILTER (WHERE e.event_type = 'page_view'::text) AS a1,
    BOOL_OR(COALESCE(STRPOS(LOWER((e.payload -> 'path'::text #>> '{}')), LOWER('Pricing'::text)) > 0, FALSE)) FILTER (WHERE e.event_type = 'page_view'::text AND e.occurred_at >= '2026-10-22 12:00:00Z'::timestamptz AND e.occurred_at < '2026-11-20 12:00:00Z'::timestamptz) AS a2,
    BOOL_OR(COALESCE(STARTS_WITH(LOWER((e.payload -> 'path'::text #>> '{}')), LOWER('/blog'::text)), FALSE)) FILTER (WHERE e.event_type = 'page_view'::text) AS a3,
    BOOL_OR(COALESCE((e.payload -> 'currency'::text #>> '{}') = ANY(ARRAY['EUR', 'USD', '1', 'true']::text[]), FALSE)) FILTER (WHERE e.event_type = 'order_completed'::text) AS a4,
    BOOL_OR(COALESCE(jsonb_typeof(e.payload -> 'coupon'::text) <> 'null', FALSE)) FILTER (WHERE e.event_type = 'order_completed'::text) AS a5,
    BOOL_OR(COALESCE(warehouse.jnum(e.payload -> 'amount'::text) > 150::numeric, FALSE)) FILTER (WHERE e.event_type = 'order_completed'::text) AS a6,
    BOOL_OR(COALESCE(warehouse.jnum(e.payload -> 'amount'::text) >= 12.5::numeric, FALSE)) FILTER (WHERE e.event_type = 'order_completed'::text) AS a7,
    BOOL_OR(COALESCE(warehouse.jnum(e.payload -> 'amount'::text) < -10::numeric, FALSE)) FILTER (WHERE e.event_type = 'order_completed'::text) AS a8,
    BOOL_OR(COALESCE(warehouse.jnum(e.payload -> 'qty'::text) <= 1::numeric, FALSE)) FILTER (WHERE e.event_type = 'order_completed'::text) AS a9,
    BOOL_OR(COALESCE(warehouse.jnum(e.payload -> 'amount'::text) = 30.5::numeric, FALSE)) FILTER (WHERE e.event_type = 'order_completed'::text) AS a10,
    BOOL_OR(COALESCE((e.payload -> 'gift'::text #>> '{}') = 'true'::text, FALSE)) FILTER (WHERE e.event_type = 'order_completed'::text) AS a11
  FROM warehouse.events e
    LEFT JOIN identity_links l ON l.tenant_id = 42 AND l.anonymous_id = e.user_id
  WHERE e.tenant_id = 42
    AND e.event_type = ANY(ARRAY['page_view', 'order_completed']::text[])
  GROUP BY 1
)
SELECT user_id
FROM a
WHERE (COALESCE(a.a0, FALSE) OR COALESCE(a.a1, FALSE) OR COALESCE(a.a2, FALSE) OR COALESCE(a.a3, FALSE) OR COALESCE(a.a4, FALSE) OR COALESCE(a.a5, FALSE) OR COALESCE(a.a6, FALSE) OR COALESCE(a.a7, FALSE) OR COALESCE(a.a8, FALSE) OR COALESCE(a.a9, FALSE) OR COALESCE(a.a10, FALSE) OR COALESCE(a.a11, FALSE))
