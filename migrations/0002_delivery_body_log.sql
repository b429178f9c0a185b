-- 0002: deliveries become a lean table for the intake path.
--
-- Raw bodies move to the store's body log (segment files beside the
-- database, fsynced before the row commits); a row names its body by
-- segment, offset, length and CRC-32C. Rows from before 0002 keep their
-- body in the body column (body_segment NULL); new rows store x'' there.
--
-- The table is keyed by the delivery id alone (WITHOUT ROWID: one b-tree,
-- not a rowid table plus a unique index) and has no secondary index: no
-- query looks deliveries up by time or job. The job a delivery led to is
-- found by the job key the row carries (repo, pr, head_sha, base_ref) —
-- the jobs table's unique key — instead of a job_id column, so recording a
-- delivery needs no foreign-key check and no second write to link it.
CREATE TABLE deliveries_0002 (
    id              TEXT    PRIMARY KEY,  -- X-GitHub-Delivery, lower case
    event           TEXT    NOT NULL,
    action          TEXT    NOT NULL DEFAULT '',
    installation_id INTEGER,
    repo            TEXT    NOT NULL DEFAULT '',
    pr              INTEGER,
    head_sha        TEXT    NOT NULL DEFAULT '',
    base_ref        TEXT    NOT NULL DEFAULT '',  -- with repo, pr, head_sha: the job's key
    received_at     INTEGER NOT NULL,
    status          TEXT    NOT NULL,
    reason          TEXT    NOT NULL DEFAULT '',
    body            BLOB    NOT NULL DEFAULT x'',
    body_segment    TEXT,
    body_offset     INTEGER,
    body_length     INTEGER,
    body_crc32c     INTEGER
) STRICT, WITHOUT ROWID;

INSERT INTO deliveries_0002 (id, event, action, installation_id, repo, pr, head_sha, base_ref,
    received_at, status, reason, body)
SELECT d.id, d.event, d.action, d.installation_id, COALESCE(j.repo, d.repo), d.pr,
    COALESCE(j.head_sha, d.head_sha), COALESCE(j.base_ref, ''), d.received_at, d.status, d.reason, d.body
FROM deliveries d LEFT JOIN jobs j ON j.id = d.job_id;

DROP TABLE deliveries;
ALTER TABLE deliveries_0002 RENAME TO deliveries;

-- Cancellations (an App removed from an installation, a closed pull
-- request) are rare; they scan the unfinished jobs (jobs_pr) instead of
-- every new job paying for one more index.
DROP INDEX jobs_installation;
