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
WHERE (COALESCE(u.user_id IN (SELECT m.user_id FROM segment_members m WHERE m.tenant_id = $1 AND m.segment_id = $2::bigint), FALSE))
-- params:
-- $1 = int64(42)
-- $2 = int64(3)
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
WHERE (COALESCE(u.user_id IN (SELECT m.user_id FROM segment_members m WHERE m.tenant_id = 42 AND m.segment_id = 3::bigint), FALSE))
