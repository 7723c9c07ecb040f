-- Issue 22 (import fidelity): a ticket lifetime is a uint32 on the wire (RFC 5077 3.3
-- ticket_lifetime_hint, RFC 8446 4.6.1 ticket_lifetime); zgrab2 writes it as such. An
-- integer column held only 2^31-1, so larger hints were refused. bigint holds them all.
DROP VIEW tls_lifetime_hint_v;
ALTER TABLE tls_handshake ALTER COLUMN ticket_lifetime TYPE bigint;
COMMENT ON COLUMN tls_handshake.ticket_lifetime IS 'Seconds: ticket_lifetime_hint (TLS 1.2) or ticket_lifetime (TLS 1.3) of the first ticket; the full uint32 range (0..4294967295).';
CREATE VIEW tls_lifetime_hint_v AS
SELECT run_id, hostname, version, max(ticket_lifetime) AS lifetime_s
FROM tls_handshake WHERE status = 'success' AND ticket_count > 0
GROUP BY run_id, hostname, version;
COMMENT ON VIEW tls_lifetime_hint_v IS 'Fig 4.6-4.7: ticket lifetime hint (1.2) / ticket_lifetime (1.3) in seconds per run, host and version.';
COMMENT ON COLUMN tls_lifetime_hint_v.lifetime_s IS 'Seconds: largest ticket lifetime hint (TLS 1.2) / ticket_lifetime (TLS 1.3) the host announced in the run.';
DO $$
DECLARE col text;
BEGIN
    FOREACH col IN ARRAY ARRAY['run_id', 'hostname', 'version'] LOOP
        EXECUTE format('COMMENT ON COLUMN tls_lifetime_hint_v.%I IS %L', col,
                       (SELECT col_description('tls_handshake'::regclass, attnum) FROM pg_attribute
                        WHERE attrelid = 'tls_handshake'::regclass AND attname = col));
    END LOOP;
END $$;
