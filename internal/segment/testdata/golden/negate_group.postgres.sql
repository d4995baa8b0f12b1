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
  WHERE r.tenant_id = $1 AND r.event_type = $8::text
  GROUP BY 1
),
a AS (
  SELECT COALESCE(l.user_id, e.user_id) AS user_id,
    BOOL_OR(COALESCE(STRPOS(LOWER((e.payload -> $5::text #>> '{}')), LOWER($6::text)) > 0, FALSE)) FILTER (WHERE e.event_type = $7::text AND e.occurred_at >= $4::timestamptz) AS a0
  FROM warehouse.events e
    LEFT JOIN identity_links l ON l.tenant_id = $1 AND l.anonymous_id = e.user_id
  WHERE e.tenant_id = $1
    AND e.event_type = ANY($10::text[])
    AND e.occurred_at >= $4::timestamptz
  GROUP BY 1
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
  SELECT COALESCE(l.user_id, r.user_id) AS user_id, SUM(r.events)::bigint AS events, MAX(r.last_at) AS last_at
  FROM warehouse.user_event_stats r
    LEFT JOIN identity_links l ON l.tenant_id = 42 AND l.anonymous_id = r.user_id
  WHERE r.tenant_id = 42 AND r.event_type = 'order_completed'::text
  GROUP BY 1
),
s1 AS (
  SELECT COALESCE(l.user_id, r.user_id) AS user_id, SUM(r.events)::bigint AS events, MAX(r.last_at) AS last_at
  FROM warehouse.user_event_stats r
    LEFT JOIN identity_links l ON l.tenant_id = 42 AND l.anonymous_id = r.user_id
  WHERE r.tenant_id = 42 AND r.event_type = 'signup'::text
  GROUP BY 1
),
a AS (
  SELECT COALESCE(l.user_id, e.user_id) AS user_id,
    BOOL_OR(COALESCE(STRPOS(LOWER((e.payload -> 'path'::text #>> '{}')), LOWER('pricing'::text)) > 0, FALSE)) FILTER (WHERE e.event_type = 'page_view'::text AND e.occurred_at >= '2026-11-14 12:00:00Z'::timestamptz) AS a0
  FROM warehouse.events e
    LEFT JOIN identity_links l ON l.tenant_id = 42 AND l.anonymous_id = e.user_id
  WHERE e.tenant_id = 42
    AND e.event_type = ANY(ARRAY['page_view']::text[])
    AND e.occurred_at >= '2026-11-14 12:00:00Z'::timestamptz
  GROUP BY 1
)
SELECT user_id
FROM s0
  LEFT JOIN s1 USING (user_id)
  LEFT JOIN a USING (user_id)
WHERE (COALESCE(COALESCE(s0.events, 0) >= 1::bigint, FALSE) AND NOT (COALESCE(a.a0, FALSE) OR COALESCE(s1.last_at >= '2026-10-22 12:00:00Z'::timestamptz, FALSE)))
