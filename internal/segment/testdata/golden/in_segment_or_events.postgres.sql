WITH a AS (
  SELECT e.user_id,
    COUNT(*) FILTER (WHERE e.event_type = $4::text AND e.occurred_at >= $3::timestamptz) AS a0
  FROM warehouse.events e
  WHERE e.tenant_id = $1
    AND e.event_type = ANY($6::text[])
    AND e.occurred_at >= $3::timestamptz
  GROUP BY e.user_id
)
SELECT u.user_id
FROM profiles u
  LEFT JOIN a ON a.user_id = u.user_id
WHERE u.tenant_id = $1
  AND (COALESCE(u.user_id IN (SELECT m.user_id FROM segment_members m WHERE m.tenant_id = $1 AND m.segment_id = $2::bigint), FALSE) OR COALESCE(COALESCE(a.a0, 0) >= $5::bigint, FALSE))
-- params:
-- $1 = int64(42)
-- $2 = int64(3)
-- $3 = time.Time(2026-11-14T12:00:00Z)
-- $4 = string("page_view")
-- $5 = int64(1)
-- $6 = []string{"page_view"}
-- display:
WITH a AS (
  SELECT e.user_id,
    COUNT(*) FILTER (WHERE e.event_type = 'page_view'::text AND e.occurred_at >= '2026-11-14 12:00:00Z'::timestamptz) AS a0
  FROM warehouse.events e
  WHERE e.tenant_id = 42
    AND e.event_type = ANY(ARRAY['page_view']::text[])
    AND e.occurred_at >= '2026-11-14 12:00:00Z'::timestamptz
  GROUP BY e.user_id
)
SELECT u.user_id
FROM profiles u
  LEFT JOIN a ON a.user_id = u.user_id
WHERE u.tenant_id = 42
  AND (COALESCE(u.user_id IN (SELECT m.user_id FROM segment_members m WHERE m.tenant_id = 42 AND m.segment_id = 3::bigint), FALSE) OR COALESCE(COALESCE(a.a0, 0) >= 1::bigint, FALSE))
