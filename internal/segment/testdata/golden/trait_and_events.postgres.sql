WITH a AS (
  SELECT COALESCE(l.user_id, e.user_id) AS user_id,
    AVG(warehouse.jnum(e.payload -> $6::text)) FILTER (WHERE e.event_type = $7::text AND e.occurred_at >= $4::timestamptz AND e.occurred_at < $5::timestamptz) AS a0
  FROM warehouse.events e
    LEFT JOIN identity_links l ON l.tenant_id = $1 AND l.anonymous_id = e.user_id
  WHERE e.tenant_id = $1
    AND e.event_type = ANY($10::text[])
    AND e.occurred_at >= $4::timestamptz
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
  LEFT JOIN a ON a.user_id = u.user_id
WHERE (COALESCE((u.traits -> $2::text #>> '{}') = ANY($3::text[]), FALSE) AND COALESCE(a.a0 > $8::numeric, FALSE) AND COALESCE((u.traits -> $2::text #>> '{}') IS DISTINCT FROM $9::text, FALSE))
-- params:
-- $1 = int64(42)
-- $2 = string("country")
-- $3 = []string{"US", "DE"}
-- $4 = time.Time(2026-09-22T12:00:00Z)
-- $5 = time.Time(2026-11-21T12:00:00Z)
-- $6 = string("amount")
-- $7 = string("order_completed")
-- $8 = float64(20)
-- $9 = string("FR")
-- $10 = []string{"order_completed"}
-- display:
WITH a AS (
  SELECT COALESCE(l.user_id, e.user_id) AS user_id,
    AVG(warehouse.jnum(e.payload -> 'amount'::text)) FILTER (WHERE e.event_type = 'order_completed'::text AND e.occurred_at >= '2026-09-22 12:00:00Z'::timestamptz AND e.occurred_at < '2026-11-21 12:00:00Z'::timestamptz) AS a0
  FROM warehouse.events e
    LEFT JOIN identity_links l ON l.tenant_id = 42 AND l.anonymous_id = e.user_id
  WHERE e.tenant_id = 42
    AND e.event_type = ANY(ARRAY['order_completed']::text[])
    AND e.occurred_at >= '2026-09-22 12:00:00Z'::timestamptz
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
  LEFT JOIN a ON a.user_id = u.user_id
WHERE (COALESCE((u.traits -> 'country'::text #>> '{}') = ANY(ARRAY['US', 'DE']::text[]), FALSE) AND COALESCE(a.a0 > 20::numeric, FALSE) AND COALESCE((u.traits -> 'country'::text #>> '{}') IS DISTINCT FROM 'FR'::text, FALSE))
