-- 0008: every attempt at a job, with its own error; refused runs get times.
--
-- jobs.last_error keeps only the newest error. job_attempts keeps one row
-- per attempt: a claim (attempts rising while the job turns running)
-- starts one, and the job leaving running ends it with the state it went
-- to (done, queued for a retry, failed, dead, superseded, cancelled), its
-- error and reason. Triggers write it, so every statement that claims or
-- releases a job — those of today and of any later store — records its
-- attempt in the same transaction, and intake (which inserts jobs, or
-- updates queued ones) writes nothing here.
CREATE TABLE job_attempts (
    job_id     INTEGER NOT NULL REFERENCES jobs (id),
    rerun      INTEGER NOT NULL,           -- jobs.reruns at the claim
    attempt    INTEGER NOT NULL,           -- 1-based, per rerun
    owner      TEXT    NOT NULL DEFAULT '', -- the worker that claimed it
    started_at INTEGER NOT NULL,
    ended_at   INTEGER,                    -- NULL while it runs
    result     TEXT    NOT NULL DEFAULT '', -- '' while it runs, else the job's next state
    error      TEXT    NOT NULL DEFAULT '', -- jobs.last_error as the attempt ended
    reason     TEXT    NOT NULL DEFAULT '', -- jobs.reason as the attempt ended
    PRIMARY KEY (job_id, rerun, attempt)
) STRICT;

CREATE TRIGGER job_attempt_started AFTER UPDATE OF attempts ON jobs
WHEN NEW.attempts > OLD.attempts AND NEW.state = 'running'
BEGIN
    INSERT INTO job_attempts (job_id, rerun, attempt, owner, started_at)
    VALUES (NEW.id, NEW.reruns, NEW.attempts, COALESCE(NEW.lease_owner, ''), NEW.updated_at)
    ON CONFLICT DO NOTHING;
END;

CREATE TRIGGER job_attempt_ended AFTER UPDATE OF state ON jobs
WHEN OLD.state = 'running' AND NEW.state <> 'running'
BEGIN
    UPDATE job_attempts SET ended_at = NEW.updated_at, result = NEW.state,
        error = NEW.last_error, reason = NEW.reason
    WHERE job_id = NEW.id AND rerun = OLD.reruns AND attempt = OLD.attempts;
END;

-- A run refused before anything ran (an invalid .github/gilf.yml, a
-- missing installation) was recorded with no times (0), so it fell out of
-- every date filter. From now on such a run is stamped when it is
-- recorded; the ones before this migration take their job's last update,
-- the nearest time the store knows.
UPDATE runs SET finished_at = (SELECT j.updated_at FROM jobs j WHERE j.id = runs.job_id) WHERE finished_at = 0;
UPDATE runs SET started_at = finished_at WHERE started_at = 0;
