-- 0009: the store's own id, made once, here.
--
-- Markers gilf posts on GitHub (the summary review's job line, the check
-- run's external_id, the changes and comments reviews) name this store as
-- well as the job, so a fresh database that counts its jobs from 1 again,
-- or a move to another engine, never takes another store's post for its
-- own. The id is a row, so a backup and its restore keep it; nothing
-- writes it again. 16 lower-case hex digits (64 random bits).
CREATE TABLE store_identity (
    id         TEXT    NOT NULL PRIMARY KEY CHECK (length(id) = 16),
    created_at INTEGER NOT NULL
) STRICT;
INSERT INTO store_identity (id, created_at)
VALUES (lower(hex(randomblob(8))), CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));
