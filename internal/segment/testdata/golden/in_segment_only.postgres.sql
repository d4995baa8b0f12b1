SELECT u.user_id
FROM profiles u
WHERE u.tenant_id = $1
  AND (COALESCE(u.user_id IN (SELECT m.user_id FROM segment_members m WHERE m.tenant_id = $1 AND m.segment_id = $2::bigint), FALSE))
-- params:
-- $1 = int64(42)
-- $2 = int64(3)
-- display:
SELECT u.user_id
FROM profiles u
WHERE u.tenant_id = 42
  AND (COALESCE(u.user_id IN (SELECT m.user_id FROM segment_members m WHERE m.tenant_id = 42 AND m.segment_id = 3::bigint), FALSE))
