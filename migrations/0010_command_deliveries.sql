-- 0010: commands in pull-request comments (issue 33).
--
-- A command is an issue_comment delivery that intake recorded as queued
-- (no job); the command worker claims it (running) and finishes it (done
-- or ignored). Every replica's worker polls for the queued and running
-- ones each second, and the budget counts the done ones of the last hour.
-- deliveries has no other secondary index (0002): without this one each
-- poll would read the whole table. It is partial, so a pull_request
-- delivery costs intake nothing more; a comment pays one index entry.
CREATE INDEX deliveries_commands ON deliveries (status, received_at)
    WHERE event = 'issue_comment';
