-- 0002_tfo: TCP Fast Open probes (scanners/tfo): support scan (thesis Table 3.1),
-- load-balancing survey (Fig 3.2, 3.3), cross-address cookie reuse and a kernel-path
-- cross-check. One row per probe; every row references scan_run(id).

CREATE TABLE tfo_probe (
    run_id       bigint      NOT NULL REFERENCES scan_run(id) ON DELETE CASCADE,
    round        integer     NOT NULL DEFAULT 0 CHECK (round >= 0),
    rank         integer,
    hostname     text,
    address      inet,
    port         integer     NOT NULL,
    status       text        NOT NULL,
    reply        text        CHECK (reply IN ('syn-ack', 'rst', 'timeout')),
    tfo_kind     text        CHECK (tfo_kind IN ('rfc7413', 'experimental')),
    cookie       bytea,
    cookie_len   integer,
    options      text[],
    rcv_window   integer,
    error        text,
    probed_at    timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE tfo_probe IS 'One SYN carrying a TFO cookie request (or one resolution/policy failure) per target and round; written by netsurvey scan tfo (round 0) and scan tfo-lb (rounds 1..N).';
COMMENT ON COLUMN tfo_probe.run_id IS 'scan_run.id of the scan (kind tfo or tfo-lb).';
COMMENT ON COLUMN tfo_probe.round IS '0 for a support scan; 1..N = connection number of the load-balancing survey.';
COMMENT ON COLUMN tfo_probe.rank IS 'Rank of the hostname in its top list (NULL for bare addresses).';
COMMENT ON COLUMN tfo_probe.hostname IS 'Hostname probed (NULL for bare addresses/ranges).';
COMMENT ON COLUMN tfo_probe.address IS 'Address the SYN went to (NULL if resolution failed).';
COMMENT ON COLUMN tfo_probe.port IS 'Destination TCP port.';
COMMENT ON COLUMN tfo_probe.status IS 'netsurvey ScanStatus: success (SYN-ACK), connection-refused (RST), connection-timeout (silence), resolution-failed, blocked (never contacted), unknown-error (e.g. send failed: ENETUNREACH).';
COMMENT ON COLUMN tfo_probe.reply IS 'What answered the SYN: syn-ack, rst or timeout; NULL if no SYN was sent.';
COMMENT ON COLUMN tfo_probe.tfo_kind IS 'Fast Open option in the SYN-ACK: rfc7413 (kind 34), experimental (kind 254, ExID 0xF989) or NULL (none).';
COMMENT ON COLUMN tfo_probe.cookie IS 'Fast Open cookie bytes from the SYN-ACK (empty if the option carried none).';
COMMENT ON COLUMN tfo_probe.cookie_len IS 'Cookie length in bytes (RFC 7413: 4..16, even); NULL without TFO option.';
COMMENT ON COLUMN tfo_probe.options IS 'Other TCP options of the reply: mss=N (bytes), sackok, ws=N (shift), ts, optK:L.';
COMMENT ON COLUMN tfo_probe.rcv_window IS 'Receive window advertised in the reply (bytes, unscaled).';
COMMENT ON COLUMN tfo_probe.error IS 'Short reason for anything but a reply (resolver error, policy reason, errno).';
COMMENT ON COLUMN tfo_probe.probed_at IS 'When the row was recorded (UTC).';
CREATE INDEX tfo_probe_run ON tfo_probe (run_id, round);

CREATE TABLE tfo_reuse (
    run_id        bigint  NOT NULL REFERENCES scan_run(id) ON DELETE CASCADE,
    hostname      text    NOT NULL,
    cookie_from   inet    NOT NULL,
    address       inet    NOT NULL,
    control       boolean NOT NULL,
    cookie        bytea   NOT NULL,
    data_len      integer NOT NULL,
    reply         text    NOT NULL CHECK (reply IN ('syn-ack', 'rst', 'timeout')),
    data_acked    boolean,
    new_cookie    bytea,
    status        text    NOT NULL,
    probed_at     timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE tfo_reuse IS 'One SYN with data carrying the cookie that address cookie_from issued, sent to address (another address of the same hostname, or cookie_from itself as control); written by netsurvey scan tfo-reuse.';
COMMENT ON COLUMN tfo_reuse.run_id IS 'scan_run.id (kind tfo-reuse).';
COMMENT ON COLUMN tfo_reuse.hostname IS 'Hostname whose addresses are compared.';
COMMENT ON COLUMN tfo_reuse.cookie_from IS 'Address that issued the cookie (to the same vantage address).';
COMMENT ON COLUMN tfo_reuse.address IS 'Address the SYN with data and cookie was sent to.';
COMMENT ON COLUMN tfo_reuse.control IS 'True if address = cookie_from (the cookie must be accepted there).';
COMMENT ON COLUMN tfo_reuse.cookie IS 'Cookie presented (bytes).';
COMMENT ON COLUMN tfo_reuse.data_len IS 'Bytes of data carried in the SYN.';
COMMENT ON COLUMN tfo_reuse.reply IS 'syn-ack, rst or timeout.';
COMMENT ON COLUMN tfo_reuse.data_acked IS 'True if the SYN-ACK acknowledged the SYN data (ack = isn + 1 + data_len): cookie accepted.';
COMMENT ON COLUMN tfo_reuse.new_cookie IS 'Cookie the SYN-ACK carried instead (a server rejecting the cookie issues a fresh one); NULL if none.';
COMMENT ON COLUMN tfo_reuse.status IS 'netsurvey ScanStatus of the probe.';
COMMENT ON COLUMN tfo_reuse.probed_at IS 'When the row was recorded (UTC).';
CREATE INDEX tfo_reuse_run ON tfo_reuse (run_id);

CREATE TABLE tfo_kernel_check (
    run_id          bigint  NOT NULL REFERENCES scan_run(id) ON DELETE CASCADE,
    hostname        text,
    address         inet    NOT NULL,
    port            integer NOT NULL,
    raw_cookie      bytea,
    kernel_cookie   bytea,
    syn_data_acked  boolean,
    error           text,
    checked_at      timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE tfo_kernel_check IS 'Kernel-path cross-check of a sample of the raw support scan: two connections with TCP_FASTOPEN_CONNECT, the cookie the kernel cached (ip tcp_metrics) and whether the second SYN''s data was acknowledged (TCP_INFO tcpi_options & 0x20).';
COMMENT ON COLUMN tfo_kernel_check.run_id IS 'scan_run.id of the support scan (kind tfo) the sample belongs to.';
COMMENT ON COLUMN tfo_kernel_check.hostname IS 'Hostname of the sampled target.';
COMMENT ON COLUMN tfo_kernel_check.address IS 'Address connected to.';
COMMENT ON COLUMN tfo_kernel_check.port IS 'TCP port connected to.';
COMMENT ON COLUMN tfo_kernel_check.raw_cookie IS 'Cookie the raw-socket probe received.';
COMMENT ON COLUMN tfo_kernel_check.kernel_cookie IS 'fo_cookie the kernel cached after the first connection (ip tcp_metrics show); NULL if none.';
COMMENT ON COLUMN tfo_kernel_check.syn_data_acked IS 'TCP_INFO of the second connection: the server acknowledged data sent in the SYN.';
COMMENT ON COLUMN tfo_kernel_check.error IS 'Why the check failed, if it did.';
COMMENT ON COLUMN tfo_kernel_check.checked_at IS 'When the check ran (UTC).';

-- Table 3.1: share of hostnames with TFO support per top-list cut (first address, round 0).
CREATE VIEW tfo_support_by_cut AS
SELECT p.run_id, c.cut,
       count(*)                                                   AS hostnames,
       count(*) FILTER (WHERE p.status = 'resolution-failed')     AS resolution_failed,
       count(*) FILTER (WHERE p.reply IN ('syn-ack', 'rst'))      AS responded,
       count(*) FILTER (WHERE p.reply = 'timeout')                AS silent,
       count(*) FILTER (WHERE p.cookie_len > 0)                   AS tfo,
       count(*) FILTER (WHERE p.cookie_len > 0)::float8 / count(*) AS tfo_share
FROM (SELECT DISTINCT ON (run_id, rank) * FROM tfo_probe
      WHERE round = 0 AND rank IS NOT NULL ORDER BY run_id, rank, (cookie_len > 0) DESC NULLS LAST) p
JOIN (VALUES (10), (100), (1000), (10000), (100000), (1000000)) c(cut) ON p.rank <= c.cut
GROUP BY p.run_id, c.cut;
COMMENT ON VIEW tfo_support_by_cut IS 'Thesis Table 3.1: per run and top-list cut (top 10 .. 1M), hostnames, resolution failures, responses, silence and the share with a TFO cookie in the SYN-ACK (denominator: every hostname of the cut). With --all-addresses a hostname counts as TFO if any address gave a cookie.';

-- Per hostname of a load-balancing survey: rounds, TFO rounds, distinct addresses.
CREATE VIEW tfo_lb_host AS
SELECT run_id, hostname,
       count(*) FILTER (WHERE reply IS NOT NULL)                     AS rounds_probed,
       count(*) FILTER (WHERE cookie_len > 0)                        AS rounds_tfo,
       count(DISTINCT address) FILTER (WHERE reply IS NOT NULL)      AS addresses,
       CASE WHEN count(*) FILTER (WHERE cookie_len > 0) = 0 THEN 'never'
            WHEN count(*) FILTER (WHERE cookie_len > 0) = count(*) THEN 'always'
            ELSE 'sometimes' END                                     AS tfo_class
FROM tfo_probe WHERE round > 0 AND hostname IS NOT NULL
GROUP BY run_id, hostname;
COMMENT ON VIEW tfo_lb_host IS 'Thesis Fig 3.2 input: per survey run and hostname, rounds probed, rounds with a TFO cookie, distinct answering addresses and the class always/sometimes/never supporting TFO (a failed round counts against always).';

-- Fig 3.3: per connection number k, share of always-TFO hostnames whose k-th connection
-- went to an address not seen in connections 1..k-1 (a cached cookie is useless).
CREATE VIEW tfo_lb_new_address AS
WITH p AS (
    SELECT t.run_id, t.hostname, t.round, t.address,
           NOT EXISTS (SELECT 1 FROM tfo_probe e WHERE e.run_id = t.run_id AND e.hostname = t.hostname
                       AND e.round > 0 AND e.round < t.round AND e.address = t.address) AS new_address
    FROM tfo_probe t JOIN tfo_lb_host h ON h.run_id = t.run_id AND h.hostname = t.hostname
    WHERE t.round > 0 AND h.tfo_class = 'always'
)
SELECT run_id, round AS connection, count(*) AS hostnames,
       count(*) FILTER (WHERE new_address) AS new_address,
       count(*) FILTER (WHERE new_address)::float8 / count(*) AS failure_rate
FROM p WHERE round > 1 GROUP BY run_id, round;
COMMENT ON VIEW tfo_lb_new_address IS 'Thesis Fig 3.3: for connection k >= 2 of hostnames always supporting TFO, how many went to an address unseen in connections 1..k-1 (failure_rate = share whose cached cookies cannot be used).';

CREATE VIEW tfo_reuse_summary AS
SELECT run_id, control, count(*) AS probes,
       count(*) FILTER (WHERE data_acked) AS accepted,
       count(*) FILTER (WHERE NOT data_acked AND new_cookie IS NOT NULL) AS new_cookie_issued,
       count(*) FILTER (WHERE reply <> 'syn-ack') AS no_syn_ack
FROM tfo_reuse GROUP BY run_id, control;
COMMENT ON VIEW tfo_reuse_summary IS 'Cross-address cookie reuse: per run, control (same address) vs cross (other address of the hostname) probes, how many had their SYN data accepted and how many got a fresh cookie instead.';
