-- The ledger of written view-count batches (internal/page, counter.go). Every API replica counts
-- public page reads in memory and adds them to generated_pages.view_count and page_ai_crawls in
-- batches; each batch gets a random id when it is taken out of memory and keeps it until it is
-- known to be written. Its id is inserted here in the transaction that adds its counts, so a
-- batch written once and retried because the acknowledgement of its commit was lost (timeout,
-- broken connection) finds its id and adds nothing: a retried flush never counts twice.
--
-- A replica retries a batch every flush interval (one second by default), so an id is only
-- needed for as long as a batch can be held; ids older than a day are deleted by the replicas'
-- periodic sweep, which keeps the table at about a day of flushes.
CREATE TABLE page_view_flushes (
    flush_id   UUID        PRIMARY KEY,
    flushed_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX page_view_flushes_flushed_at_idx ON page_view_flushes (flushed_at);
