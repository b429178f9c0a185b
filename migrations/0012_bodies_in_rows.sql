-- 0012: delivery bodies live in their rows again, as snappy blocks.
--
-- The body log beside the database (<database>.bodies/*.seg, migration
-- 0002) is gone: a snappy block of a real payload is about one overflow
-- page, and the intake floor holds with it in the row (docs/store.md).
-- Before this migration runs, the store copies every body the log holds
-- into its row (store/sqlite/bodylog.go); after it, rows from before 0002
-- have their raw bodies encoded. body_crc32c stays: the block's CRC-32C.
ALTER TABLE deliveries DROP COLUMN body_segment;
ALTER TABLE deliveries DROP COLUMN body_offset;
ALTER TABLE deliveries DROP COLUMN body_length;
