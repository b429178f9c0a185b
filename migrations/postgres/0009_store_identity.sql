-- 0009: the store's own id, made once, here (see migrations/0009 for
-- SQLite): the markers gilf posts on GitHub name it with the job, so
-- another store's post is never taken for this one's. A row, so a dump and
-- its restore keep it. 16 lower-case hex digits (64 random bits).
CREATE TABLE store_identity (
    id         TEXT   NOT NULL PRIMARY KEY CHECK (length(id) = 16),
    created_at BIGINT NOT NULL
);
INSERT INTO store_identity (id, created_at)
VALUES (substr(md5(random()::text || clock_timestamp()::text || pg_backend_pid()::text), 1, 16),
        (extract(epoch FROM clock_timestamp()) * 1000)::bigint);
