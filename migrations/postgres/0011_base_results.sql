-- 0011: failure origin (SPEC §3.4.1).
--
-- base_results keeps what a pull request's base did when gilf validated it
-- to tell the pull request's failures from the base's: one row per step,
-- keyed by repository, base sha, executor, step and the head's command
-- for it, so a later head on the same base reuses it instead of running
-- the base again. result is the step's status and parsed failures as JSON.
CREATE TABLE base_results (
    repo       TEXT   NOT NULL,
    base_sha   TEXT   NOT NULL,
    executor   TEXT   NOT NULL,
    step       TEXT   NOT NULL,
    command    TEXT   NOT NULL,
    result     TEXT   NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (repo, base_sha, executor, step, command)
);

-- Retention (store/prune.go) deletes the rows stored before its cutoff.
CREATE INDEX base_results_created ON base_results (created_at);

-- The base's run and the retry of failed steps are cost spans of lanes of
-- their own.
ALTER TABLE cost_spans DROP CONSTRAINT cost_spans_lane_check;
ALTER TABLE cost_spans ADD CONSTRAINT cost_spans_lane_check
    CHECK (lane IN ('primary', 'shadow', 'semantic', 'base', 'retry'));
