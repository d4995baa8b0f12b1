WITH a AS (
  SELECT COALESCE(l.user_id, e.user_id) AS user_id,
    COUNT(*) FILTER (WHERE e.event_type = $4::text AND e.occurred_at >= $3::timestamptz) AS a0
  FROM warehouse.events e
    LEFT JOIN identity_links l ON l.tenant_id = $1 AND l.anonymous_id = e.user_id
  WHERE e.tenant_id = $1
    AND e.event_type = ANY($6::text[])
    AND e.occurred_at >= $3::timestamptz
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
WHERE (COALESCE(u.user_id IN (SELECT m.user_id FROM segment_members m WHERE m.tenant_id = $1 AND m.segment_id = $2::bigint), FALSE) OR COALESCE(COALESCE(a.a0, 0) >= $5::bigint, FALSE))
-- params:
-- $1 = int64(42)
-- $2 = int64(3)
-- $3 = time.Time(2026-11-14T12:00:00Z)
-- $4 = string("page_view")
-- $5 = int64(1)
-- $6 = []string{"page_view"}
-- display:
WITH a AS (
  SELECT COALESCE(l.user_id, e.user_id) AS user_id,
    COUNT(*) FILTER (WHERE e.event_type = 'page_view'::text AND e.occurred_at >= '2026-11-14 12:00:00Z'::timestamptz) AS a0
  FROM warehouse.events e
    LEFT JOIN identity_links l ON l.tenant_id = 42 AND l.anonymous_id = e.user_id
  WHERE e.tenant_id = 42
    AND e.event_type = ANY(ARRAY['page_view']::text[])
    AND e.occurred_at >= '2026-11-14 12:00:00Z'::timestamptz
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
WHERE (COALESCE(u.user_id IN (SELECT m.user_id FROM segment_members m WHERE m.tenant_id = 42 AND m.segment_id = 3::bigint), FALSE) OR COALESCE(COALESCE(a.a0, 0) >= 1::bigint, FALSE))
