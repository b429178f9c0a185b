-- 0002: a delivery's row is stored as it comes, without a compression attempt.
--
-- A row over 2 KB (TOAST_TUPLE_THRESHOLD) made PostgreSQL try to pglz-compress
-- the body, which is a snappy block already: a wasted attempt on every insert
-- (15% of the server's time in intake, measured with perf). A real 25-31 KB
-- payload is 4.6-5.5 KB as snappy, so rows up to the page's 8160 bytes stay
-- as they are; a larger one is still compressed or moved out of line.
ALTER TABLE deliveries SET (toast_tuple_target = 8160);
