-- 0006: the CHECK on jobs.state as comparisons instead of an IN list.
--
-- SQLite codes an IN list of more than two constants as a temporary
-- b-tree, built again each time a statement runs: the CHECK built one for
-- every job inserted or updated, a cost every delivery paid at intake.
-- The rule is the same, so no row can break it, and the table's records
-- do not change: this is SQLite's documented way of changing a CHECK
-- constraint in place (https://www.sqlite.org/lang_altertable.html,
-- "Making Other Kinds Of Table Schema Changes"), without copying the
-- table. RESET turns schema writing off and has this connection read the
-- schema again; other connections already open read it again at their
-- next statement, as the creation and removal of gilf_schema_0006 change
-- the schema version.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
SET sql = replace(sql,
    'CHECK (state IN
                         (''queued'', ''running'', ''done'', ''failed'', ''dead'', ''superseded'', ''cancelled''))',
    'CHECK (state = ''queued'' OR state = ''running'' OR state = ''done'' OR state = ''failed''
                         OR state = ''dead'' OR state = ''superseded'' OR state = ''cancelled'')')
WHERE type = 'table' AND name = 'jobs';
PRAGMA writable_schema = RESET;
CREATE TABLE gilf_schema_0006 (x INTEGER);
DROP TABLE gilf_schema_0006;
