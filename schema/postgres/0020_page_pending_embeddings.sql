-- A page's generation waits (bounded) for the catalogue's queued embeddings before it searches.
-- pending_embeddings is what it saw last: while the page is generating, how many products its
-- query could match are still queued for an embedding; on a page generated once the wait's bound
-- passed, how many were left out that way; NULL when none were.
ALTER TABLE generated_pages ADD COLUMN pending_embeddings BIGINT CHECK (pending_embeddings > 0);
