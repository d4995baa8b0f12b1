-- The ids the loader and segment runs look up, join and sort by (user ids, event ids, event types,
-- property names) compare byte by byte. Under the database's default collation every comparison
-- in their indexes went through the C library's strcoll (with C.UTF-8 here, and slower still with
-- a linguistic locale such as en_US.UTF-8, the managed-Postgres default), which was a tenth of
-- the Postgres CPU of a load with 1M users; and an id's order depended on the server's locale.
-- With COLLATE "C" the comparisons are memcmp and sorts use abbreviated keys. Equality is the
-- same under both collations, so no stored row changes meaning; an id order is now byte order
-- (keyset pages and the activation sync's ordered diffs read and compare under the same column
-- collation, so they stay consistent).
--
-- Every user_id column changes together: a comparison of a "C" column with a default-collation
-- column is done in "C", and an index in the default collation could no longer serve it. Only
-- the indexes are rebuilt (no table rewrite; on a large warehouse this migration takes as long as
-- building its indexes again).
ALTER TABLE warehouse.events
    ALTER COLUMN event_id TYPE TEXT COLLATE "C",
    ALTER COLUMN user_id TYPE TEXT COLLATE "C",
    ALTER COLUMN event_type TYPE TEXT COLLATE "C";
ALTER TABLE warehouse.event_ids ALTER COLUMN event_id TYPE TEXT COLLATE "C";
ALTER TABLE warehouse.user_event_stats
    ALTER COLUMN event_type TYPE TEXT COLLATE "C",
    ALTER COLUMN user_id TYPE TEXT COLLATE "C";
ALTER TABLE warehouse.user_property_stats
    ALTER COLUMN event_type TYPE TEXT COLLATE "C",
    ALTER COLUMN property TYPE TEXT COLLATE "C",
    ALTER COLUMN user_id TYPE TEXT COLLATE "C";
ALTER TABLE profiles ALTER COLUMN user_id TYPE TEXT COLLATE "C";
ALTER TABLE ingestion_hourly ALTER COLUMN event_type TYPE TEXT COLLATE "C";
ALTER TABLE segment_members ALTER COLUMN user_id TYPE TEXT COLLATE "C";
ALTER TABLE segment_member_changes ALTER COLUMN user_id TYPE TEXT COLLATE "C";
ALTER TABLE activation_members ALTER COLUMN user_id TYPE TEXT COLLATE "C";
