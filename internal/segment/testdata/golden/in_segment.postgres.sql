WITH a AS (
  SELECT COALESCE(l.user_id, e.user_id) AS user_id,
    COUNT(*) FILTER (WHERE e.event_type = $5::text AND e.occurred_at >= $4::timestamptz) AS a0
  FROM warehouse.events e
    LEFT JOIN identity_links l ON l.tenant_id = $1 AND l.anonymous_id = e.user_id
  WHERE e.tenant_id = $1
    AND e.event_type = ANY($7::text[])
    AND e.occurred_at >= $4::timestamptz
  GROUP BY 1
)
SELECT user_id
FROM a
WHERE (COALESCE(user_id IN (SELECT m.user_id FROM segment_members m WHERE m.tenant_id = $1 AND m.segment_id = $2::bigint), FALSE) AND NOT COALESCE(user_id IN (SELECT m.user_id FROM segment_members m WHERE m.tenant_id = $1 AND m.segment_id = $3::bigint), FALSE) AND COALESCE(COALESCE(a.a0, 0) >= $6::bigint, FALSE))
-- params:
-- $1 = int64(42)
-- $2 = int64(3)
-- $3 = int64(4)
-- $4 = time.Time(2026-10-22T12:00:00Z)
-- $5 = string("page_view")
-- $6 = int64(1)
-- $7 = []string{"page_view"}
-- display:
WITH a AS (
  SELECT COALESCE(l.user_id, e.user_id) AS user_id,
    COUNT(*) FILTER (WHERE e.event_type = 'page_view'::text AND e.occurred_at >= '2026-10-22 12:00:00Z'::timestamptz) AS a0
  FROM warehouse.events e
    LEFT JOIN identity_links l ON l.tenant_id = 42 AND l.anonymous_id = e.user_id
  WHERE e.tenant_id = 42
    AND e.event_type = ANY(ARRAY['page_view']::text[])
    AND e.occurred_at >= '2026-10-22 12:00:00Z'::timestamptz
  GROUP BY 1
)
SELECT user_id
FROM a
WHERE (COALESCE(user_id IN (SELECT m.user_id FROM segment_members m WHERE m.tenant_id = 42 AND m.segment_id = 3::bigint), FALSE) AND NOT COALESCE(user_id IN (SELECT m.user_id FROM segment_members m WHERE m.tenant_id = 42 AND m.segment_id = 4::bigint), FALSE) AND COALESCE(COALESCE(a.a0, 0) >= 1::bigint, FALSE))
