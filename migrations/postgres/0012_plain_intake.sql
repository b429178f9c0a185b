-- 0012: intake records a batch with its plain statements.
--
-- The pipelined batch that gilf_settled (0003) stopped is gone, and so is
-- the body log the columns below named on SQLite (never used here: bodies
-- have always been in their rows on PostgreSQL).
DROP FUNCTION IF EXISTS gilf_settled(boolean);
ALTER TABLE deliveries DROP COLUMN body_segment;
ALTER TABLE deliveries DROP COLUMN body_offset;
ALTER TABLE deliveries DROP COLUMN body_length;
