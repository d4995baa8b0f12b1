-- Readable pages: the AI crawlers a tenant keeps away from its hosted pages. robots.txt of
-- /p/<tenant_slug>/ disallows each listed crawler (by its User-Agent token, internal/page
-- Crawlers) and allows every other; empty (the default) allows them all.
ALTER TABLE tenants ADD COLUMN blocked_ai_crawlers TEXT[] NOT NULL DEFAULT '{}';
