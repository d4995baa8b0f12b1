-- The loader updates the per-user rollups and profiles in place, a few thousand rows per batch.
-- None of those updates changes an indexed column, so with free room on the row's page Postgres
-- writes the new version beside the old one (a HOT update: no new index entry, and the dead
-- version is pruned the next time the page is read, without waiting for VACUUM). Full pages
-- (the default fillfactor of 100) leave no room, so every update also inserted into the primary
-- key index and the tables and indexes grew with dead versions until the next VACUUM. New pages
-- keep 30% free; pages written before this migration get the room back as VACUUM FULL or
-- CLUSTER rewrites them.
ALTER TABLE warehouse.user_event_stats SET (fillfactor = 70);
ALTER TABLE warehouse.user_property_stats SET (fillfactor = 70);
ALTER TABLE profiles SET (fillfactor = 70);
