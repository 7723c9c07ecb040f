-- 0161_quic_second_opinion (issue 24, the QUIC zoo): what an independent QUIC client, ngtcp2's
-- own (Debian ngtcp2-client, GnuTLS), saw of a server - a second opinion on scan quic-discover
-- and scan quic (scanners/quic_second_opinion/scanner.py). One row per target and fact.
CREATE TABLE quic_second_opinion (
    run_id    bigint  NOT NULL REFERENCES scan_run (id) ON DELETE CASCADE,
    hostname  text,
    address   inet,
    port      integer NOT NULL,
    client    text    NOT NULL,
    fact      text    CHECK (fact IN ('vn_versions', 'vn_greased_count', 'retry', 'new_token_count', 'tickets',
                                      'ticket_count', 'ticket_lifetime_s', 'ticket_max_early_data',
                                      'resumption', 'zero_rtt')),
    value     text,
    status    text    NOT NULL,
    error     text
);
CREATE INDEX ON quic_second_opinion (run_id);
COMMENT ON TABLE quic_second_opinion IS 'quic-second-opinion: per target and fact the verdict of ngtcp2''s client (gtlsclient), three connections per target: a Version Negotiation probe, a fresh connection, a resumption (issue 24).';
COMMENT ON COLUMN quic_second_opinion.run_id IS 'scan_run.id of the run.';
COMMENT ON COLUMN quic_second_opinion.hostname IS 'SNI (the client''s URI host).';
COMMENT ON COLUMN quic_second_opinion.address IS 'Address connected to.';
COMMENT ON COLUMN quic_second_opinion.port IS 'UDP port.';
COMMENT ON COLUMN quic_second_opinion.client IS 'The independent client and its version, e.g. ngtcp2-client 0.12.1.';
COMMENT ON COLUMN quic_second_opinion.fact IS 'vn_versions (value: the non-reserved versions of the server''s Version Negotiation to a reserved version, hex, ''|''-joined, in the server''s order), vn_greased_count (reserved versions in it), retry (the fresh connection drew a Retry), new_token_count (NEW_TOKEN frames on the fresh connection), tickets (the client got a resumable session), ticket_count / ticket_lifetime_s / ticket_max_early_data (NewSessionTicket messages in the server''s 1-RTT CRYPTO data as the client dumped it: count, lifetime s, early_data max size bytes or none), resumption (the resuming connection''s server flight had no Certificate: a PSK handshake), zero_rtt (early data sent and not rejected); NULL when the target failed before any check.';
COMMENT ON COLUMN quic_second_opinion.value IS 'The verdict as text (true/false, a count, versions); NULL without a verdict (error says why).';
COMMENT ON COLUMN quic_second_opinion.status IS 'success (value holds a verdict) or why not (application-error, blocked, ...).';
COMMENT ON COLUMN quic_second_opinion.error IS 'Why the fact has no verdict (timeout, handshake: <client''s last line>, no session to resume); NULL on success.';
