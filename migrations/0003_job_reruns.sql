-- 0003: re-runs (GitHub's Re-run button; a label change after a skipped run).
--
-- A re-run queues a finished job again instead of making a new one: the
-- job keeps its id, and reruns counts how often it was asked again. The
-- pipeline publishes each run under "<id>.<reruns>" (the check run's
-- external_id), so what an earlier run posted is not taken as its own.
ALTER TABLE jobs ADD COLUMN reruns INTEGER NOT NULL DEFAULT 0;
