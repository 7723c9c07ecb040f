-- 0071_tfo_campaign_rounds (issue 26): `scan tfo` run as a campaign of rounds (schedule
-- start of a rounds x interval entry; netsurvey/campaign.py) writes round k = 1..N into
-- tfo_probe.round, so the load-balancing views (Figs 3.2/3.3: round > 0) read one campaign
-- run as N connections per hostname. Table 3.1 reads a support scan's round 0, or the
-- first round of a campaign run (round <= 1; a support scan has only round 0).
CREATE OR REPLACE VIEW tfo_support_by_cut AS
SELECT p.run_id, c.cut,
       count(*)                                                   AS hostnames,
       count(*) FILTER (WHERE p.status = 'resolution-failed')     AS resolution_failed,
       count(*) FILTER (WHERE p.reply IN ('syn-ack', 'rst'))      AS responded,
       count(*) FILTER (WHERE p.reply = 'timeout')                AS silent,
       count(*) FILTER (WHERE p.cookie_len > 0)                   AS tfo,
       count(*) FILTER (WHERE p.cookie_len > 0)::float8 / count(*) AS tfo_share
FROM (SELECT DISTINCT ON (run_id, rank) * FROM tfo_probe
      WHERE round <= 1 AND rank IS NOT NULL ORDER BY run_id, rank, (cookie_len > 0) DESC NULLS LAST) p
JOIN (VALUES (10), (100), (1000), (10000), (100000), (1000000)) c(cut) ON p.rank <= c.cut
GROUP BY p.run_id, c.cut;
COMMENT ON VIEW tfo_support_by_cut IS 'Thesis Table 3.1: per run and top-list cut (top 10 .. 1M), hostnames, resolution failures, responses, silence and the share with a TFO cookie in the SYN-ACK (denominator: every hostname of the cut). Round 0 of a support scan, or round 1 of a campaign run of scan tfo (or of a tfo-lb survey). With --all-addresses a hostname counts as TFO if any address gave a cookie.';
COMMENT ON COLUMN tfo_probe.round IS '0 for a support scan; 1..N = connection number of the load-balancing survey (scan tfo-lb), or round k of a campaign run of scan tfo (schedule start; run_round).';
