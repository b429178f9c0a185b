-- 0004: retention (gilf prune, GILF_RETENTION_DAYS).
--
-- Pruning keeps every row and drops only bulk: a delivery's body (its
-- body log segment is deleted, or its pre-0002 body column emptied) and
-- the step output heads and tails inside a finished run's record and its
-- shadow telemetry. The times say when, so a read of a pruned body
-- answers "pruned" instead of failing as a lost one, and a run is
-- stripped once.
ALTER TABLE deliveries ADD COLUMN body_pruned_at INTEGER;
ALTER TABLE runs ADD COLUMN output_pruned_at INTEGER;

-- The runs pruning has yet to strip, by age: an hourly prune reads these
-- only, never the history it already stripped.
CREATE INDEX runs_unpruned ON runs (finished_at) WHERE output_pruned_at IS NULL;
