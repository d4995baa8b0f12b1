-- Every API replica's membership cache (internal/segment MembershipCache) may hold an answer for
-- an id as a user of its own. When that id is linked to a user, the answer must change on every
-- replica at once: each new link is announced on the membership channel, "<tenant>:link:<id>",
-- delivered when the transaction that made the link commits. A trigger, so that whatever writes a
-- link (the loader, an operator's repair) announces it.
CREATE FUNCTION identity_link_notice() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('cohort_membership', NEW.tenant_id::text || ':link:' || NEW.anonymous_id);
    RETURN NULL;
END
$$;
CREATE TRIGGER identity_links_notice AFTER INSERT ON identity_links
    FOR EACH ROW EXECUTE FUNCTION identity_link_notice();
