WITH s0 AS (
  SELECT user_id, events, last_at FROM warehouse.user_event_stats WHERE tenant_id = $1 AND event_type = $2::text
),
s1 AS (
  SELECT user_id, events, last_at FROM warehouse.user_event_stats WHERE tenant_id = $1 AND event_type = $8::text
),
a AS (
  SELECT e.user_id,
    BOOL_OR(COALESCE(STRPOS(LOWER((e.payload -> $5::text #>> '{}')), LOWER($6::text)) > 0, FALSE)) FILTER (WHERE e.event_type = $7::text AND e.occurred_at >= $4::timestamptz) AS a0
  FROM warehouse.events e
  WHERE e.tenant_id = $1
    AND e.event_type = ANY($10::text[])
    AND e.occurred_at >= $4::timestamptz
  GROUP BY e.user_id
)
SELECT user_id
FROM s0
  LEFT JOIN s1 USING (user_id)
  LEFT JOIN a USING (user_id)
WHERE (COALESCE(COALESCE(s0.events, 0) >= $3::bigint, FALSE) AND NOT (COALESCE(a.a0, FALSE) OR COALESCE(s1.last_at >= $9::timestamptz, FALSE)))
-- params:
-- $1 = int64(42)
-- $2 = string("order_completed")
-- $3 = int64(1)
-- $4 = time.Time(2026-11-14T12:00:00Z)
-- $5 = string("path")
-- $6 = string("pricing")
-- $7 = string("page_view")
-- $8 = string("signup")
-- $9 = time.Time(2026-10-22T12:00:00Z)
-- $10 = []string{"page_view"}
-- display:
WITH s0 AS (
  SELECT user_id, events, last_at FROM warehouse.user_event_stats WHERE tenant_id = 42 AND event_type = 'order_completed'::text
),
s1 AS (
  SELECT user_id, events, last_at FROM warehouse.user_event_stats WHERE tenant_id = 42 AND event_type = 'signup'::text
),
a AS (
  SELECT e.user_id,
    BOOL_OR(COALESCE(STRPOS(LOWER((e.payload -> 'path'::text #>> '{}')), LOWER('pricing'::text)) > 0, FALSE)) FILTER (WHERE e.event_type = 'page_view'::text AND e.occurred_at >= '2026-11-14 12:00:00Z'::timestamptz) AS a0
  FROM warehouse.events e
  WHERE e.tenant_id = 42
    AND e.event_type = ANY(ARRAY['page_view']::text[])
    AND e.occurred_at >= '2026-11-14 12:00:00Z'::timestamptz
  GROUP BY e.user_id
)
SELECT user_id
FROM s0
  LEFT JOIN s1 USING (user_id)
  LEFT JOIN a USING (user_id)
WHERE (COALESCE(COALESCE(s0.events, 0) >= 1::bigint, FALSE) AND NOT (COALESCE(a.a0, FALSE) OR COALESCE(s1.last_at >= '2026-10-22 12:00:00Z'::timestamptz, FALSE)))
