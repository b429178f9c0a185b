-- 0002: a delivery's raw body may live in the store's append-only body log
-- (segment files beside the database, written and fsynced once per group
-- commit before the row commits) instead of the body column, which then
-- holds x''. A row with body_segment NULL keeps its body in the column.
ALTER TABLE deliveries ADD COLUMN body_segment TEXT;
ALTER TABLE deliveries ADD COLUMN body_offset INTEGER;
ALTER TABLE deliveries ADD COLUMN body_length INTEGER;
ALTER TABLE deliveries ADD COLUMN body_crc32c INTEGER;
