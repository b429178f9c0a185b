-- 0010: commands in pull-request comments (issue 33).
--
-- A command is an issue_comment delivery that intake recorded as queued
-- (no job); the command worker claims it (running) and finishes it (done
-- or ignored). Every replica's worker polls for the queued and running
-- ones: this partial index holds only those, so a poll reads a handful of
-- entries whatever the number of deliveries.
CREATE INDEX deliveries_commands ON deliveries (received_at)
    WHERE event = 'issue_comment' AND status IN ('queued', 'running');
