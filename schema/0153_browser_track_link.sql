-- 0153_browser_track_link: the delay a tracking experiment ran under (issue 25, item 4).
-- `browser track --profile P` runs the browser in the tracking vantage (testbed/trackline.py)
-- behind a delay line into the shared testbed: each verdict records the profile the delay line
-- applied (its own report, not the option), and each observed TCP connection the round trip
-- the server side saw (observer.py: kernel capture times of SYN-ACK and the client's next
-- segment), so a reader sees which delay an observation had, measured from outside the client.

ALTER TABLE browser_track_verdict ADD COLUMN link_profile text;
ALTER TABLE browser_track_verdict ADD COLUMN link_rtt_ms float8;
COMMENT ON COLUMN browser_track_verdict.link_profile IS 'Delay profile ([[profile]] of config/testbed.toml) the tracking vantage''s delay line applied during the experiment (browser track --profile); NULL = run from the shared vantage, no delay line (and rows before migration 0153).';
COMMENT ON COLUMN browser_track_verdict.link_rtt_ms IS 'Milliseconds: round trip the delay line added (its applied profile''s rtt_ms; NULL as link_profile).';

ALTER TABLE browser_track_connection ADD COLUMN handshake_rtt_ms float8;
COMMENT ON COLUMN browser_track_connection.handshake_rtt_ms IS 'Milliseconds: the TCP round trip seen by the server side (observer: kernel capture time of the server''s SYN-ACK to the client''s next segment); NULL for QUIC rows and rows before migration 0153.';

CREATE OR REPLACE VIEW browser_tracking_table AS
SELECT v.run_id, v.browser, v.browser_version, v.os, v.experiment, v.mechanism,
       max(v.wait_s) FILTER (WHERE v.presented) AS longest_presented_wait_s,
       min(v.wait_s) FILTER (WHERE v.presented = false) AS shortest_absent_wait_s,
       max(v.expected_max_s) AS expected_max_s,
       CASE WHEN bool_or(v.verdict = 'viable') THEN 'viable'
            WHEN bool_and(v.verdict = 'n/a') THEN 'n/a' ELSE 'blocked' END AS verdict,
       v.link_profile, v.link_rtt_ms,
       (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY c.handshake_rtt_ms)
          FROM browser_track_connection c
         WHERE c.run_id = v.run_id AND c.experiment = v.experiment AND c.handshake_rtt_ms IS NOT NULL)
         AS measured_rtt_median_ms,
       (SELECT count(*) FROM browser_track_connection c
         WHERE c.run_id = v.run_id AND c.experiment = v.experiment AND c.handshake_rtt_ms IS NOT NULL)
         AS measured_rtt_connections
FROM browser_track_verdict v
GROUP BY v.run_id, v.browser, v.browser_version, v.os, v.experiment, v.mechanism, v.link_profile, v.link_rtt_ms;
COMMENT ON VIEW browser_tracking_table IS 'The thesis-style table per browser/version/OS and link profile: per experiment and mechanism the longest wait at which the identifier was still presented (s), the shortest at which it was not (s), viable/blocked, the delay profile and the round trip the server side measured.';
COMMENT ON COLUMN browser_tracking_table.run_id IS 'scan_run (kind browser-track).';
COMMENT ON COLUMN browser_tracking_table.browser IS 'chromium, firefox or webkit.';
COMMENT ON COLUMN browser_tracking_table.browser_version IS 'Browser version.';
COMMENT ON COLUMN browser_tracking_table.os IS 'Operating system of the vantage (platform string).';
COMMENT ON COLUMN browser_tracking_table.experiment IS 'lifetime, hint, third-party, restart, private, vhost, quic-lifetime, quic-hint, cross-app.';
COMMENT ON COLUMN browser_tracking_table.mechanism IS 'tls-session-id, tls-ticket, tls13-psk, quic-token, quic-psk, tfo-cookie, tfo-cookie-kernel.';
COMMENT ON COLUMN browser_tracking_table.longest_presented_wait_s IS 'Seconds: longest wait after which the identifier was still presented.';
COMMENT ON COLUMN browser_tracking_table.shortest_absent_wait_s IS 'Seconds: shortest wait after which it was not presented.';
COMMENT ON COLUMN browser_tracking_table.expected_max_s IS 'Seconds: lifetime the server announced (largest).';
COMMENT ON COLUMN browser_tracking_table.verdict IS 'viable if any step was viable, n/a if the mechanism was never used, else blocked.';
COMMENT ON COLUMN browser_tracking_table.link_profile IS 'Delay profile the tracking vantage''s delay line applied (NULL = shared vantage, no delay line).';
COMMENT ON COLUMN browser_tracking_table.link_rtt_ms IS 'Milliseconds: round trip the delay line added (configured, as applied).';
COMMENT ON COLUMN browser_tracking_table.measured_rtt_median_ms IS 'Milliseconds: median TCP round trip the server side observed over the experiment''s connections (browser_track_connection.handshake_rtt_ms).';
COMMENT ON COLUMN browser_tracking_table.measured_rtt_connections IS 'Connections with a server-side round trip behind measured_rtt_median_ms.';
