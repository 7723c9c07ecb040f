-- handshake-timing (issue 25): raw timings of connection set-up per target, method and sample,
-- and the views that give the thesis's Tables 3.5 (TCP vs TFO), 5.1 (delay), 5.2 (CPU) and
-- 5.7 (TLS 1.3 full / 1-RTT resumption / 0-RTT support per top-list cut).
CREATE TABLE handshake_timing_sample (
    run_id            bigint NOT NULL REFERENCES scan_run (id),
    rank              integer,
    hostname          text,
    address           inet,
    method            text,
    sample            integer,
    status            text NOT NULL,
    error             text,
    connect_ms        double precision,
    handshake_ms      double precision,
    ttfb_ms           double precision,
    client_cpu_ms     double precision,
    server_cpu_ms     double precision,
    protocol_version  text,
    resumed           boolean,
    early_data        text,
    tfo_used          boolean,
    link_rtt_ms       double precision
);
CREATE INDEX ON handshake_timing_sample (run_id, method);
COMMENT ON TABLE handshake_timing_sample IS 'handshake-timing: one row per timed connection (target x method x sample); times from the start of the connection';
COMMENT ON COLUMN handshake_timing_sample.run_id IS 'scan_run.id of the run';
COMMENT ON COLUMN handshake_timing_sample.rank IS 'top-list rank of the target (NULL for ad-hoc targets)';
COMMENT ON COLUMN handshake_timing_sample.hostname IS 'target hostname (SNI); NULL for a bare address';
COMMENT ON COLUMN handshake_timing_sample.address IS 'address connected to (NULL when the name did not resolve)';
COMMENT ON COLUMN handshake_timing_sample.method IS 'tcp, tfo, tls12_full, tls12_id, tls12_ticket, tls13_full, tls13_psk, tls13_0rtt, quic_full, quic_resumed, quic_0rtt (scanners/handshake_timing/scanner.py)';
COMMENT ON COLUMN handshake_timing_sample.sample IS 'sample number of this method and target, from 0';
COMMENT ON COLUMN handshake_timing_sample.status IS 'success, error (this connection failed), or a target status (resolution-failed, ...)';
COMMENT ON COLUMN handshake_timing_sample.error IS 'short error text when the connection failed';
COMMENT ON COLUMN handshake_timing_sample.connect_ms IS 'TCP handshake done (connect returned; TFO: the SYN with data was sent), milliseconds from the start; NULL for QUIC';
COMMENT ON COLUMN handshake_timing_sample.handshake_ms IS 'TLS/QUIC handshake complete at the client (TCP: = connect_ms), milliseconds from the start';
COMMENT ON COLUMN handshake_timing_sample.ttfb_ms IS 'first byte of the response to one small HTTP request, milliseconds from the start';
COMMENT ON COLUMN handshake_timing_sample.client_cpu_ms IS 'CPU time of the probing thread during the connection, milliseconds';
COMMENT ON COLUMN handshake_timing_sample.server_cpu_ms IS 'CPU time of the server process during the connection (/proc/PID/schedstat), milliseconds; only for servers we own (--server-pid)';
COMMENT ON COLUMN handshake_timing_sample.protocol_version IS 'negotiated protocol (TLSv1.2, TLSv1.3, QUIC v1, TCP)';
COMMENT ON COLUMN handshake_timing_sample.resumed IS 'TLS/QUIC: the session was resumed; tfo: the SYN data was acknowledged';
COMMENT ON COLUMN handshake_timing_sample.early_data IS 'tls13_0rtt / quic_0rtt: accepted, rejected or not-sent';
COMMENT ON COLUMN handshake_timing_sample.tfo_used IS 'tcp/tfo: the server acknowledged data in the SYN (TCP_INFO TCPI_OPT_SYN_DATA)';
COMMENT ON COLUMN handshake_timing_sample.link_rtt_ms IS 'configured RTT of the path (testbed profile, --link-rtt-ms), milliseconds; NULL if unknown';

-- Per run, target and method: successful samples and their mean / median / stddev.
CREATE VIEW handshake_timing_summary AS
SELECT run_id, address, hostname, method, max(link_rtt_ms) AS link_rtt_ms,
       count(*) FILTER (WHERE status = 'success') AS samples_ok,
       count(*) FILTER (WHERE status <> 'success') AS samples_failed,
       avg(handshake_ms) AS handshake_mean_ms,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY handshake_ms) AS handshake_median_ms,
       stddev_samp(handshake_ms) AS handshake_stddev_ms,
       avg(ttfb_ms) AS ttfb_mean_ms,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY ttfb_ms) AS ttfb_median_ms,
       stddev_samp(ttfb_ms) AS ttfb_stddev_ms,
       min(handshake_ms) AS handshake_min_ms,
       min(ttfb_ms) AS ttfb_min_ms,
       avg(client_cpu_ms) AS client_cpu_mean_ms,
       avg(server_cpu_ms) AS server_cpu_mean_ms,
       bool_and(resumed) AS all_resumed,
       count(*) FILTER (WHERE early_data = 'accepted') AS early_data_accepted
FROM handshake_timing_sample
WHERE method IS NOT NULL
GROUP BY run_id, address, hostname, method;
COMMENT ON VIEW handshake_timing_summary IS 'handshake-timing per run, target and method: sample counts and mean / median / stddev of handshake and first-byte times (ms), mean CPU (ms)';

-- Thesis Table 3.5: connection + small download with TCP vs TFO (repeat connection with a cookie).
CREATE VIEW handshake_timing_table_3_5 AS
SELECT t.run_id, t.address, t.hostname, t.link_rtt_ms,
       t.ttfb_mean_ms AS tcp_ttfb_mean_ms, t.ttfb_stddev_ms AS tcp_ttfb_stddev_ms,
       f.ttfb_mean_ms AS tfo_ttfb_mean_ms, f.ttfb_stddev_ms AS tfo_ttfb_stddev_ms,
       t.ttfb_median_ms - f.ttfb_median_ms AS tfo_saving_median_ms,
       t.ttfb_min_ms - f.ttfb_min_ms AS tfo_saving_min_ms,
       f.all_resumed AS tfo_data_in_syn_always
FROM handshake_timing_summary t
JOIN handshake_timing_summary f ON f.run_id = t.run_id AND f.address = t.address AND f.method = 'tfo'
WHERE t.method = 'tcp';
COMMENT ON VIEW handshake_timing_table_3_5 IS 'thesis Table 3.5: mean (stddev) ms to connect and get the first response byte with TCP vs TFO (repeat connection with a cookie), and the median saving (ms)';

-- Thesis Table 5.1 (delay) and 5.2 (CPU): TLS handshake modes (and QUIC), per run and target.
CREATE VIEW handshake_timing_table_5_1 AS
SELECT s.run_id, s.address, s.hostname, s.method, s.link_rtt_ms, s.samples_ok,
       s.handshake_mean_ms, s.ttfb_mean_ms, s.ttfb_stddev_ms, s.ttfb_median_ms,
       f.ttfb_median_ms - s.ttfb_median_ms AS saving_vs_full_median_ms,
       f.ttfb_min_ms - s.ttfb_min_ms AS saving_vs_full_min_ms,
       s.early_data_accepted
FROM handshake_timing_summary s
LEFT JOIN handshake_timing_summary f
       ON f.run_id = s.run_id AND f.address = s.address
      AND f.method = CASE WHEN s.method LIKE 'tls12%' THEN 'tls12_full'
                          WHEN s.method LIKE 'tls13%' THEN 'tls13_full'
                          WHEN s.method LIKE 'quic%' THEN 'quic_full' END
WHERE s.method LIKE 'tls%' OR s.method LIKE 'quic%';
COMMENT ON VIEW handshake_timing_table_5_1 IS 'thesis Table 5.1: mean (stddev) ms to establish a TLS/QUIC connection and get the first byte of a short transfer, per handshake mode, with the median saving against the full handshake of the same version (ms)';

CREATE VIEW handshake_timing_table_5_2 AS
SELECT run_id, address, hostname, method, samples_ok, client_cpu_mean_ms, server_cpu_mean_ms
FROM handshake_timing_summary
WHERE method LIKE 'tls%' OR method LIKE 'quic%';
COMMENT ON VIEW handshake_timing_table_5_2 IS 'thesis Table 5.2: mean CPU ms per connection (handshake and a short transfer) of the client and, where we own it, the server';

-- Thesis Table 5.7: per top-list cut, websites with a TLS 1.3 full handshake, 1-RTT resumption, 0-RTT.
CREATE VIEW handshake_timing_table_5_7 AS
WITH per_site AS (
    SELECT run_id, hostname, min(rank) AS rank,
           bool_or(method = 'tls13_full' AND status = 'success' AND protocol_version = 'TLSv1.3') AS tls13,
           bool_or(method = 'tls13_psk' AND status = 'success' AND resumed) AS resumption_1rtt,
           bool_or(method = 'tls13_0rtt' AND status = 'success' AND early_data = 'accepted') AS zero_rtt
    FROM handshake_timing_sample WHERE rank IS NOT NULL
    GROUP BY run_id, hostname
), cuts(top_n) AS (VALUES (10), (100), (1000), (10000), (100000), (1000000))
SELECT p.run_id, c.top_n, count(*) AS sites_probed,
       count(*) FILTER (WHERE tls13) AS tls13_sites,
       count(*) FILTER (WHERE tls13 AND resumption_1rtt) AS resumption_1rtt_sites,
       count(*) FILTER (WHERE tls13 AND zero_rtt) AS zero_rtt_sites
FROM per_site p JOIN cuts c ON p.rank <= c.top_n
GROUP BY p.run_id, c.top_n;
COMMENT ON VIEW handshake_timing_table_5_7 IS 'thesis Table 5.7: per top-list cut (rank <= top_n), sites probed, with a TLS 1.3 full handshake, and of those with 1-RTT resumption (PSK) and with 0-RTT early data accepted';

-- Column comments of the views.
COMMENT ON COLUMN handshake_timing_summary.run_id IS 'scan_run.id of the run';
COMMENT ON COLUMN handshake_timing_summary.address IS 'address connected to';
COMMENT ON COLUMN handshake_timing_summary.hostname IS 'target hostname (SNI); NULL for a bare address';
COMMENT ON COLUMN handshake_timing_summary.method IS 'handshake method (see handshake_timing_sample.method)';
COMMENT ON COLUMN handshake_timing_summary.link_rtt_ms IS 'configured RTT of the path (--link-rtt-ms), milliseconds';
COMMENT ON COLUMN handshake_timing_summary.samples_ok IS 'successful samples (connections)';
COMMENT ON COLUMN handshake_timing_summary.samples_failed IS 'failed samples (connections)';
COMMENT ON COLUMN handshake_timing_summary.handshake_mean_ms IS 'mean time until the handshake completed at the client, milliseconds';
COMMENT ON COLUMN handshake_timing_summary.handshake_median_ms IS 'median time until the handshake completed at the client, milliseconds';
COMMENT ON COLUMN handshake_timing_summary.handshake_stddev_ms IS 'sample standard deviation of the handshake time, milliseconds';
COMMENT ON COLUMN handshake_timing_summary.ttfb_mean_ms IS 'mean time to the first response byte, milliseconds';
COMMENT ON COLUMN handshake_timing_summary.ttfb_median_ms IS 'median time to the first response byte, milliseconds';
COMMENT ON COLUMN handshake_timing_summary.ttfb_stddev_ms IS 'sample standard deviation of the time to the first response byte, milliseconds';
COMMENT ON COLUMN handshake_timing_summary.client_cpu_mean_ms IS 'mean CPU time of the client per connection, milliseconds';
COMMENT ON COLUMN handshake_timing_summary.server_cpu_mean_ms IS 'mean CPU time of the server per connection (servers we own), milliseconds; NULL otherwise';
COMMENT ON COLUMN handshake_timing_summary.handshake_min_ms IS 'shortest time until the handshake completed at the client, milliseconds (delay from a busy machine only adds: the minimum estimates the unloaded value)';
COMMENT ON COLUMN handshake_timing_summary.ttfb_min_ms IS 'shortest time to the first response byte, milliseconds';
COMMENT ON COLUMN handshake_timing_summary.all_resumed IS 'every sample resumed its session (TLS/QUIC) or had its SYN data acknowledged (tfo)';
COMMENT ON COLUMN handshake_timing_summary.early_data_accepted IS 'samples whose 0-RTT early data the server accepted';
COMMENT ON COLUMN handshake_timing_table_3_5.run_id IS 'scan_run.id of the run';
COMMENT ON COLUMN handshake_timing_table_3_5.address IS 'address connected to';
COMMENT ON COLUMN handshake_timing_table_3_5.hostname IS 'target hostname (SNI); NULL for a bare address';
COMMENT ON COLUMN handshake_timing_table_3_5.link_rtt_ms IS 'configured RTT of the path (--link-rtt-ms), milliseconds';
COMMENT ON COLUMN handshake_timing_table_3_5.tcp_ttfb_mean_ms IS 'TCP: mean time to the first response byte, milliseconds';
COMMENT ON COLUMN handshake_timing_table_3_5.tcp_ttfb_stddev_ms IS 'TCP: standard deviation of the time to the first response byte, milliseconds';
COMMENT ON COLUMN handshake_timing_table_3_5.tfo_ttfb_mean_ms IS 'TFO with a cookie: mean time to the first response byte, milliseconds';
COMMENT ON COLUMN handshake_timing_table_3_5.tfo_ttfb_stddev_ms IS 'TFO with a cookie: standard deviation of the time to the first response byte, milliseconds';
COMMENT ON COLUMN handshake_timing_table_3_5.tfo_saving_median_ms IS 'median TCP minus median TFO time to the first byte, milliseconds';
COMMENT ON COLUMN handshake_timing_table_3_5.tfo_saving_min_ms IS 'shortest TCP minus shortest TFO time to the first byte, milliseconds';
COMMENT ON COLUMN handshake_timing_table_3_5.tfo_data_in_syn_always IS 'every TFO sample had its SYN data acknowledged';
COMMENT ON COLUMN handshake_timing_table_5_1.run_id IS 'scan_run.id of the run';
COMMENT ON COLUMN handshake_timing_table_5_1.address IS 'address connected to';
COMMENT ON COLUMN handshake_timing_table_5_1.hostname IS 'target hostname (SNI); NULL for a bare address';
COMMENT ON COLUMN handshake_timing_table_5_1.method IS 'handshake method (see handshake_timing_sample.method)';
COMMENT ON COLUMN handshake_timing_table_5_1.link_rtt_ms IS 'configured RTT of the path (--link-rtt-ms), milliseconds';
COMMENT ON COLUMN handshake_timing_table_5_1.samples_ok IS 'successful samples (connections)';
COMMENT ON COLUMN handshake_timing_table_5_1.handshake_mean_ms IS 'mean time until the handshake completed at the client, milliseconds';
COMMENT ON COLUMN handshake_timing_table_5_1.ttfb_mean_ms IS 'mean time to the first response byte, milliseconds';
COMMENT ON COLUMN handshake_timing_table_5_1.ttfb_stddev_ms IS 'sample standard deviation of the time to the first response byte, milliseconds';
COMMENT ON COLUMN handshake_timing_table_5_1.ttfb_median_ms IS 'median time to the first response byte, milliseconds';
COMMENT ON COLUMN handshake_timing_table_5_1.saving_vs_full_median_ms IS 'median time to first byte of the full handshake of the same protocol version minus this method, milliseconds';
COMMENT ON COLUMN handshake_timing_table_5_1.saving_vs_full_min_ms IS 'shortest time to first byte of the full handshake of the same protocol version minus this method, milliseconds';
COMMENT ON COLUMN handshake_timing_table_5_1.early_data_accepted IS 'samples whose 0-RTT early data the server accepted';
COMMENT ON COLUMN handshake_timing_table_5_2.run_id IS 'scan_run.id of the run';
COMMENT ON COLUMN handshake_timing_table_5_2.address IS 'address connected to';
COMMENT ON COLUMN handshake_timing_table_5_2.hostname IS 'target hostname (SNI); NULL for a bare address';
COMMENT ON COLUMN handshake_timing_table_5_2.method IS 'handshake method (see handshake_timing_sample.method)';
COMMENT ON COLUMN handshake_timing_table_5_2.samples_ok IS 'successful samples (connections)';
COMMENT ON COLUMN handshake_timing_table_5_2.client_cpu_mean_ms IS 'mean CPU time of the client per connection, milliseconds';
COMMENT ON COLUMN handshake_timing_table_5_2.server_cpu_mean_ms IS 'mean CPU time of the server per connection (servers we own), milliseconds; NULL otherwise';
COMMENT ON COLUMN handshake_timing_table_5_7.run_id IS 'scan_run.id of the run';
COMMENT ON COLUMN handshake_timing_table_5_7.top_n IS 'top-list cut: sites with rank <= top_n';
COMMENT ON COLUMN handshake_timing_table_5_7.sites_probed IS 'sites probed within the cut';
COMMENT ON COLUMN handshake_timing_table_5_7.tls13_sites IS 'sites completing a TLS 1.3 full handshake';
COMMENT ON COLUMN handshake_timing_table_5_7.resumption_1rtt_sites IS 'TLS 1.3 sites that resumed a session with a PSK (1-RTT resumption)';
COMMENT ON COLUMN handshake_timing_table_5_7.zero_rtt_sites IS 'TLS 1.3 sites that accepted 0-RTT early data';
