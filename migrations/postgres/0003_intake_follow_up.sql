-- 0003: a pipelined intake batch stops on the server when a delivery needs a follow-up.
--
-- Intake sends a whole batch of deliveries to the server in one round trip:
-- BEGIN, the pull requests' locks, one statement per round, the notification
-- and COMMIT, so the locks are held only while the server works, never while
-- the client is away. A delivery whose answer needs a statement of its own (a
-- duplicate id, a reviewed state that already has its job) must stop that
-- batch before its COMMIT: the round statement calls gilf_settled on each of
-- its rows, which raises GF001 for such a delivery; the transaction rolls back
-- and intake records the batch round by round instead.
CREATE FUNCTION gilf_settled(settled boolean) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF settled THEN
        RETURN true;
    END IF;
    RAISE EXCEPTION 'gilf: a delivery of the pipelined batch needs a follow-up' USING ERRCODE = 'GF001';
END
$$;
