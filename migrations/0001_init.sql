-- 0001: deliveries, jobs, runs and everything a run produced.
-- Times are Unix milliseconds (UTC). Nullable columns mean "unknown", never zero.

CREATE TABLE jobs (
    id               INTEGER PRIMARY KEY,
    repo             TEXT    NOT NULL,
    pr               INTEGER NOT NULL,
    head_sha         TEXT    NOT NULL,
    head_repo        TEXT    NOT NULL DEFAULT '',
    base_ref         TEXT    NOT NULL DEFAULT '',
    installation_id  INTEGER,            -- NULL: the payload carried no installation
    delivery_id      TEXT    NOT NULL,   -- the delivery that created the job
    trigger_action   TEXT    NOT NULL,
    triggers         INTEGER NOT NULL DEFAULT 1,
    pr_updated_at    INTEGER NOT NULL DEFAULT 0,
    state            TEXT    NOT NULL CHECK (state IN
                         ('queued', 'running', 'done', 'failed', 'dead', 'superseded', 'cancelled')),
    reason           TEXT    NOT NULL DEFAULT '',
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  INTEGER NOT NULL,
    lease_owner      TEXT,
    lease_expires_at INTEGER,
    lease_gen        INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT    NOT NULL DEFAULT '',
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    -- One job per reviewed state: the head against its base branch (the
    -- base branch also holds the repository's config). Later triggers for
    -- the same state attach to the job.
    UNIQUE (repo, pr, head_sha, base_ref)
) STRICT;

-- Partial indexes: finished jobs (almost all rows) leave them, so intake
-- and claims touch small indexes.
CREATE INDEX jobs_ready ON jobs (next_attempt_at, id) WHERE state = 'queued';
CREATE INDEX jobs_lease ON jobs (lease_expires_at) WHERE state = 'running';
CREATE INDEX jobs_pr ON jobs (repo, pr) WHERE state IN ('queued', 'running');
CREATE INDEX jobs_pr_updated ON jobs (repo, pr, pr_updated_at);
CREATE INDEX jobs_installation ON jobs (installation_id) WHERE state IN ('queued', 'running');

CREATE TABLE deliveries (
    id              TEXT    PRIMARY KEY,  -- X-GitHub-Delivery, lower case
    event           TEXT    NOT NULL,
    action          TEXT    NOT NULL DEFAULT '',
    installation_id INTEGER,
    repo            TEXT    NOT NULL DEFAULT '',
    pr              INTEGER,
    head_sha        TEXT    NOT NULL DEFAULT '',
    received_at     INTEGER NOT NULL,
    status          TEXT    NOT NULL,
    reason          TEXT    NOT NULL DEFAULT '',
    job_id          INTEGER REFERENCES jobs (id),
    body            BLOB    NOT NULL
) STRICT;

CREATE INDEX deliveries_received ON deliveries (received_at);
CREATE INDEX deliveries_job ON deliveries (job_id);

CREATE TABLE runs (
    id          INTEGER PRIMARY KEY,
    job_id      INTEGER NOT NULL REFERENCES jobs (id),
    lease_gen   INTEGER NOT NULL,
    outcome     TEXT    NOT NULL,
    reason      TEXT    NOT NULL DEFAULT '',
    refusal     TEXT    NOT NULL DEFAULT '',
    executor    TEXT    NOT NULL DEFAULT '',
    tier        TEXT    NOT NULL DEFAULT '',
    record      TEXT    NOT NULL,         -- validation.Record as JSON, whole
    started_at  INTEGER NOT NULL,
    finished_at INTEGER NOT NULL
) STRICT;

CREATE INDEX runs_job ON runs (job_id);
CREATE INDEX runs_finished ON runs (finished_at);

CREATE TABLE steps (
    run_id        INTEGER NOT NULL REFERENCES runs (id),
    idx           INTEGER NOT NULL,
    name          TEXT    NOT NULL,
    status        TEXT    NOT NULL,
    exit_code     INTEGER,
    signal        TEXT    NOT NULL DEFAULT '',
    duration_ms   INTEGER NOT NULL DEFAULT 0,
    reported      INTEGER NOT NULL DEFAULT 0,
    reason        TEXT    NOT NULL DEFAULT '',
    output_bytes  INTEGER NOT NULL DEFAULT 0,
    output_sha256 TEXT    NOT NULL DEFAULT '',
    truncated     INTEGER NOT NULL DEFAULT 0,
    redactions    INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, idx)
) STRICT;

CREATE TABLE findings (
    id                INTEGER PRIMARY KEY,
    run_id            INTEGER NOT NULL REFERENCES runs (id),
    idx               INTEGER NOT NULL,
    severity          TEXT    NOT NULL,
    step              TEXT    NOT NULL DEFAULT '',
    path              TEXT    NOT NULL DEFAULT '',
    title             TEXT    NOT NULL,
    body              TEXT    NOT NULL DEFAULT '',
    execution_claim   INTEGER NOT NULL DEFAULT 0,
    evidence_status   TEXT    NOT NULL DEFAULT '',
    downgraded_reason TEXT    NOT NULL DEFAULT ''
) STRICT;

CREATE INDEX findings_run ON findings (run_id);

CREATE TABLE artifacts (
    id      INTEGER PRIMARY KEY,
    run_id  INTEGER NOT NULL REFERENCES runs (id),
    key     TEXT    NOT NULL,
    kind    TEXT    NOT NULL,
    bytes   INTEGER NOT NULL,
    sha256  TEXT    NOT NULL DEFAULT '',
    status  TEXT    NOT NULL CHECK (status IN ('persisted', 'failed')),
    url     TEXT    NOT NULL DEFAULT '',
    error   TEXT    NOT NULL DEFAULT ''
) STRICT;

CREATE INDEX artifacts_run ON artifacts (run_id);

CREATE TABLE cost_spans (
    id          INTEGER PRIMARY KEY,
    job_id      INTEGER NOT NULL REFERENCES jobs (id),
    run_id      INTEGER REFERENCES runs (id),
    lane        TEXT    NOT NULL CHECK (lane IN ('primary', 'shadow')),
    executor    TEXT    NOT NULL,
    started_at  INTEGER NOT NULL,
    finished_at INTEGER NOT NULL,
    vcpu        REAL,
    memory_gib  REAL,
    usd         REAL,            -- NULL: no rate card or missing inputs; never zero for unknown
    method      TEXT    NOT NULL DEFAULT ''
) STRICT;

CREATE INDEX cost_spans_executor ON cost_spans (executor, started_at);
CREATE INDEX cost_spans_started ON cost_spans (started_at);

CREATE TABLE shadow_telemetry (
    id           INTEGER PRIMARY KEY,
    run_id       INTEGER NOT NULL REFERENCES runs (id),
    executor     TEXT    NOT NULL,
    outcome      TEXT    NOT NULL DEFAULT '',
    error        TEXT    NOT NULL DEFAULT '',
    steps_agreed INTEGER NOT NULL DEFAULT 0,
    steps_total  INTEGER NOT NULL DEFAULT 0,
    wall_ms      INTEGER NOT NULL DEFAULT 0,
    usd          REAL,
    detail       TEXT    NOT NULL DEFAULT '{}'  -- JSON: per-step agreement, the shadow record
) STRICT;

CREATE INDEX shadow_run ON shadow_telemetry (run_id);

CREATE TABLE posted_reviews (
    job_id       INTEGER PRIMARY KEY REFERENCES jobs (id),
    review_id    INTEGER,
    check_run_id INTEGER,
    head_sha     TEXT    NOT NULL DEFAULT '',
    posted_at    INTEGER NOT NULL
) STRICT;
