-- 0011: failure origin (SPEC §3.4.1).
--
-- base_results keeps what a pull request's base did when gilf validated it
-- to tell the pull request's failures from the base's: one row per step,
-- keyed by repository, base sha, executor, step and the head's command
-- for it, so a later head on the same base reuses it instead of running
-- the base again. result is the step's status and parsed failures as JSON.
CREATE TABLE base_results (
    repo       TEXT    NOT NULL,
    base_sha   TEXT    NOT NULL,
    executor   TEXT    NOT NULL,
    step       TEXT    NOT NULL,
    command    TEXT    NOT NULL,
    result     TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (repo, base_sha, executor, step, command)
) STRICT;

-- The base's run and the retry of failed steps are cost spans of lanes of
-- their own. SQLite cannot change a CHECK constraint, so cost_spans is
-- rebuilt as 0005 did, with the wider lane CHECK, its rows copied as they
-- were and its indexes made again. No table refers to cost_spans.
CREATE TABLE cost_spans_0011 (
    id            INTEGER PRIMARY KEY,
    job_id        INTEGER NOT NULL REFERENCES jobs (id),
    run_id        INTEGER REFERENCES runs (id),
    lane          TEXT    NOT NULL CHECK (lane IN ('primary', 'shadow', 'semantic', 'base', 'retry')),
    executor      TEXT    NOT NULL,
    started_at    INTEGER NOT NULL,
    finished_at   INTEGER NOT NULL,
    vcpu          REAL,
    memory_gib    REAL,
    usd           REAL,            -- NULL: no rate card or missing inputs; never zero for unknown
    method        TEXT    NOT NULL DEFAULT '',
    input_tokens  INTEGER,         -- semantic lane only; NULL: not a model span, or not reported
    output_tokens INTEGER
) STRICT;

INSERT INTO cost_spans_0011 (id, job_id, run_id, lane, executor, started_at, finished_at, vcpu, memory_gib, usd, method, input_tokens, output_tokens)
SELECT id, job_id, run_id, lane, executor, started_at, finished_at, vcpu, memory_gib, usd, method, input_tokens, output_tokens FROM cost_spans;

DROP TABLE cost_spans;
ALTER TABLE cost_spans_0011 RENAME TO cost_spans;

CREATE INDEX cost_spans_executor ON cost_spans (executor, started_at);

-- Retention (store/prune.go) deletes the rows stored before its cutoff.
CREATE INDEX base_results_created ON base_results (created_at);
CREATE INDEX cost_spans_started ON cost_spans (started_at);
