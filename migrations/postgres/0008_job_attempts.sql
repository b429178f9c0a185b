-- 0008 (PostgreSQL): every attempt at a job, with its own error; refused
-- runs get times. As SQLite's 0008: a claim starts a row of job_attempts,
-- the job leaving running ends it; triggers write it in the transaction
-- of the statement that claims or releases the job.
CREATE TABLE job_attempts (
    job_id     BIGINT NOT NULL REFERENCES jobs (id),
    rerun      BIGINT NOT NULL,
    attempt    BIGINT NOT NULL,
    owner      TEXT   NOT NULL DEFAULT '',
    started_at BIGINT NOT NULL,
    ended_at   BIGINT,
    result     TEXT   NOT NULL DEFAULT '',
    error      TEXT   NOT NULL DEFAULT '',
    reason     TEXT   NOT NULL DEFAULT '',
    PRIMARY KEY (job_id, rerun, attempt)
);

CREATE FUNCTION gilf_job_attempt_started() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_attempts (job_id, rerun, attempt, owner, started_at)
    VALUES (NEW.id, NEW.reruns, NEW.attempts, COALESCE(NEW.lease_owner, ''), NEW.updated_at)
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;

CREATE TRIGGER job_attempt_started AFTER UPDATE OF attempts ON jobs
FOR EACH ROW WHEN (NEW.attempts > OLD.attempts AND NEW.state = 'running')
EXECUTE FUNCTION gilf_job_attempt_started();

CREATE FUNCTION gilf_job_attempt_ended() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE job_attempts SET ended_at = NEW.updated_at, result = NEW.state,
        error = NEW.last_error, reason = NEW.reason
    WHERE job_id = NEW.id AND rerun = OLD.reruns AND attempt = OLD.attempts;
    RETURN NULL;
END
$$;

CREATE TRIGGER job_attempt_ended AFTER UPDATE OF state ON jobs
FOR EACH ROW WHEN (OLD.state = 'running' AND NEW.state <> 'running')
EXECUTE FUNCTION gilf_job_attempt_ended();

-- Refused runs recorded without times take their job's last update.
UPDATE runs SET finished_at = (SELECT j.updated_at FROM jobs j WHERE j.id = runs.job_id) WHERE finished_at = 0;
UPDATE runs SET started_at = finished_at WHERE started_at = 0;
