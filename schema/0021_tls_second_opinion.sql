-- 0021_tls_second_opinion (issue 24): resumption verdicts of an independent TLS client
-- (gnutls-cli --resume), a second opinion on `scan tls` for the server zoo.
CREATE TABLE tls_second_opinion (
    run_id     bigint  NOT NULL REFERENCES scan_run (id) ON DELETE CASCADE,
    hostname   text,
    address    inet,
    port       integer NOT NULL,
    version    text    CHECK (version IN ('1.2', '1.3')),
    mechanism  text    CHECK (mechanism IN ('ticket', 'id')),
    client     text,
    status     text    NOT NULL,
    error      text,
    resumed    boolean
);
CREATE INDEX ON tls_second_opinion (run_id);
COMMENT ON TABLE tls_second_opinion IS 'tls-second-opinion: per target, TLS version and mechanism whether gnutls-cli --resume resumed the session (issue 24).';
COMMENT ON COLUMN tls_second_opinion.run_id IS 'scan_run.id of the run.';
COMMENT ON COLUMN tls_second_opinion.hostname IS 'SNI and verified name.';
COMMENT ON COLUMN tls_second_opinion.address IS 'Address connected to.';
COMMENT ON COLUMN tls_second_opinion.port IS 'TCP port.';
COMMENT ON COLUMN tls_second_opinion.version IS 'TLS version the client was limited to (1.2 or 1.3); NULL when the target failed before any check (status says why).';
COMMENT ON COLUMN tls_second_opinion.mechanism IS 'ticket (session_ticket extension / TLS 1.3 PSK) or id (TLS 1.2 session ID, client priority %NO_TICKETS); NULL as version.';
COMMENT ON COLUMN tls_second_opinion.client IS 'The independent client and its version, e.g. gnutls-cli 3.7.9.';
COMMENT ON COLUMN tls_second_opinion.status IS 'success (both connections completed a handshake: resumed says how the second went) or why not (application-error, blocked, ...).';
COMMENT ON COLUMN tls_second_opinion.error IS 'Why the check has no verdict (timeout, handshake: <client message>); NULL on success.';
COMMENT ON COLUMN tls_second_opinion.resumed IS 'gnutls-cli reported the second connection as resumed (*** This is a resumed session); NULL without a verdict.';
