-- 0008_browser_more: browser tracking probes, part 2 (browser_probes/, issue 9): QUIC
-- (HTTP/3) connections as logged by the testbed's QUIC servers, TCP Fast Open cookies of
-- other applications (cross-application experiment), and the TLS client fingerprint used to
-- attribute observed connections to the browser under test. One row per connection remains
-- the rule (browser_track_connection, transport quic for QUIC rows).

ALTER TABLE browser_track_connection
    ADD COLUMN client_app          text,
    ADD COLUMN client_fingerprint  text,
    ADD COLUMN quic_token          bytea,
    ADD COLUMN quic_token_status   text,
    ADD COLUMN quic_ticket_status  text,
    ADD COLUMN quic_session_resumed boolean,
    ADD COLUMN quic_early_data_accepted boolean,
    ADD COLUMN issued_token        bytea,
    ADD COLUMN issued_tfo_cookie   bytea;

COMMENT ON COLUMN browser_track_connection.client_app IS 'Application that made the connection: chromium, firefox, or curl (cross-application experiment); NULL in rows of part 1 (always the browser).';
COMMENT ON COLUMN browser_track_connection.client_fingerprint IS 'TLS client fingerprint of the ClientHello (cipher suites | sorted extension types, GREASE and resumption-dependent extensions removed); connections are attributed to the browser by its sockets or this fingerprint.';
COMMENT ON COLUMN browser_track_connection.quic_token IS 'QUIC: NEW_TOKEN token presented in the first Initial (NULL = none), from the QUIC server log.';
COMMENT ON COLUMN browser_track_connection.quic_token_status IS 'QUIC: the server''s verdict on that token (valid, expired, foreign, none).';
COMMENT ON COLUMN browser_track_connection.quic_ticket_status IS 'QUIC: the server''s verdict on the presented session ticket (PSK identity; first 16 bytes in tls13_psk_identity): valid, expired, key_retired, unknown, none.';
COMMENT ON COLUMN browser_track_connection.quic_session_resumed IS 'QUIC: the handshake resumed a session (PSK accepted).';
COMMENT ON COLUMN browser_track_connection.quic_early_data_accepted IS 'QUIC: 0-RTT data accepted.';
COMMENT ON COLUMN browser_track_connection.issued_token IS 'QUIC: NEW_TOKEN token the server issued on this connection (its ticket''s first 16 bytes are in issued_ticket).';

COMMENT ON COLUMN browser_track_connection.issued_tfo_cookie IS 'TFO cookie in the server''s SYN-ACK (issued to the client; NULL = none).';

CREATE VIEW browser_tracking_quic AS
SELECT run_id, experiment, step, server_name, client_port, quic_token IS NOT NULL AS token_presented,
       quic_token_status, tls13_psk_identity IS NOT NULL AS ticket_presented, quic_ticket_status,
       quic_session_resumed, quic_early_data_accepted
FROM browser_track_connection WHERE transport = 'quic';
COMMENT ON VIEW browser_tracking_quic IS 'QUIC connections of the browser tracking experiments (Sy 2019 Table 6.1 analogue): per connection whether a token / ticket was presented and what the server made of it.';
