-- 0151_tfo_lb_new_address_window (issue 26, item 6): Fig 3.3's view at a month's size.
--
-- tfo_lb_new_address asked, for every connection of an always-TFO hostname, NOT EXISTS an
-- earlier round of the same run and hostname with the same address: a correlated subquery in
-- the select list, run once per row, each scanning the run's earlier rounds (the index is on
-- (run_id, round)). Over a month of tfo-lb campaigns (bench/month.py, 10M rows: 30 runs x
-- 100K hostnames x 3.3 rounds) `plot tfo-lb-failure-rate` had not finished after 4 minutes:
-- the work grows with rows x hostnames. Same answer with a window: an address is new at the
-- round where it first appears for its (run, hostname); a NULL address was never "seen"
-- (NULL = NULL is not true), so it counts as new, as before. Same columns, types, comments
-- and grants (CREATE OR REPLACE); tests/test_partitions.py compares both definitions.
CREATE OR REPLACE VIEW tfo_lb_new_address AS
WITH p AS (
    SELECT t.run_id, t.hostname, t.round, t.address,
           t.address IS NULL
           OR t.round = min(t.round) OVER (PARTITION BY t.run_id, t.hostname, t.address) AS new_address
    FROM tfo_probe t JOIN tfo_lb_host h ON h.run_id = t.run_id AND h.hostname = t.hostname
    WHERE t.round > 0 AND h.tfo_class = 'always'
)
SELECT run_id, round AS connection, count(*) AS hostnames,
       count(*) FILTER (WHERE new_address) AS new_address,
       count(*) FILTER (WHERE new_address)::float8 / count(*) AS failure_rate
FROM p WHERE round > 1 GROUP BY run_id, round;
