-- 0005: cost spans of the semantic review's model.
--
-- A span of the semantic lane is one model call, priced by its tokens
-- (estimate:tokens); its executor is the model's card key, model:<name>.
-- SQLite cannot change a CHECK constraint, so the table is rebuilt with
-- the wider lane CHECK and two token columns, its rows copied as they
-- were and its indexes made again. No table refers to cost_spans.
CREATE TABLE cost_spans_0005 (
    id            INTEGER PRIMARY KEY,
    job_id        INTEGER NOT NULL REFERENCES jobs (id),
    run_id        INTEGER REFERENCES runs (id),
    lane          TEXT    NOT NULL CHECK (lane IN ('primary', 'shadow', 'semantic')),
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

INSERT INTO cost_spans_0005 (id, job_id, run_id, lane, executor, started_at, finished_at, vcpu, memory_gib, usd, method)
SELECT id, job_id, run_id, lane, executor, started_at, finished_at, vcpu, memory_gib, usd, method FROM cost_spans;

DROP TABLE cost_spans;
ALTER TABLE cost_spans_0005 RENAME TO cost_spans;

CREATE INDEX cost_spans_executor ON cost_spans (executor, started_at);
CREATE INDEX cost_spans_started ON cost_spans (started_at);
