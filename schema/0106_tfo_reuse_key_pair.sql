-- 0106_tfo_reuse_key_pair: TFO cookies presented again after a key rotation (issue 24, the
-- kernel's primary/backup key pair). Linux accepts a cookie made under its backup key and
-- then puts a NEW cookie (from the primary key) into the SYN-ACK (net/ipv4/tcp_fastopen.c
-- tcp_try_fastopen(): tcp_fastopen_cookie_gen_check() == 2, LINUX_MIB_TCPFASTOPENPASSIVEALTKEY):
-- "data acknowledged + new cookie" is an acceptance, not a rejection. `scan tfo-reuse
-- --cookies-from RUN` presents an earlier run's cookies; the summary counts such acceptances.

ALTER TABLE tfo_reuse ADD COLUMN cookie_run_id bigint;
ALTER TABLE tfo_reuse ALTER COLUMN hostname DROP NOT NULL;
COMMENT ON COLUMN tfo_reuse.hostname IS 'Hostname whose addresses are compared; NULL for a bare address (--cookies-from a scan tfo --cidr run).';
COMMENT ON COLUMN tfo_reuse.cookie_run_id IS 'scan_run.id of the tfo/tfo-lb run whose cookie was presented (scan tfo-reuse --cookies-from); NULL when the cookie was fetched by this run.';
COMMENT ON COLUMN tfo_reuse.new_cookie IS 'Cookie the SYN-ACK carried (NULL if none). Without data_acked: the cookie was rejected and replaced. With data_acked: the cookie was accepted under a non-primary key (Linux: the backup key) and the client is asked to replace it.';

CREATE OR REPLACE VIEW tfo_reuse_summary AS
SELECT run_id, control, count(*) AS probes,
       count(*) FILTER (WHERE data_acked) AS accepted,
       count(*) FILTER (WHERE NOT data_acked AND new_cookie IS NOT NULL) AS new_cookie_issued,
       count(*) FILTER (WHERE reply <> 'syn-ack') AS no_syn_ack,
       count(*) FILTER (WHERE data_acked AND new_cookie IS NOT NULL) AS accepted_new_cookie
FROM tfo_reuse GROUP BY run_id, control;
COMMENT ON COLUMN tfo_reuse_summary.accepted_new_cookie IS 'Probes whose SYN data was acknowledged AND whose SYN-ACK carried a fresh cookie: the cookie matched a non-primary key (Linux: the backup key after a key rotation); counted in accepted too.';
