-- 0160_tls_second_opinion_sslyze (issue 24): sslyze as a further second opinion on `scan tls`
-- (scan tls-second-opinion --client sslyze, scanners/tls_second_opinion/sslyze.py): its TLS 1.3
-- early-data verdict, its resumption counts, and the connections each client run opened.

ALTER TABLE tls_second_opinion DROP CONSTRAINT tls_second_opinion_mechanism_check;
ALTER TABLE tls_second_opinion ADD CONSTRAINT tls_second_opinion_mechanism_check
    CHECK (mechanism IN ('ticket', 'id', 'lifetime-hint', 'early-data'));
ALTER TABLE tls_second_opinion ADD COLUMN early_data_accepted boolean;
ALTER TABLE tls_second_opinion ADD COLUMN attempts integer CHECK (attempts >= 0);
ALTER TABLE tls_second_opinion ADD COLUMN resumptions integer CHECK (resumptions >= 0);
ALTER TABLE tls_second_opinion ADD COLUMN connections integer CHECK (connections >= 0);

COMMENT ON TABLE tls_second_opinion IS 'tls-second-opinion: per target, TLS version and mechanism the verdict of an independent client: gnutls-cli --resume (resumption), testssl.sh -S (resumption, ticket lifetime hint), sslyze --resum --early_data (TLS 1.2 resumption, TLS 1.3 early data) (issue 24).';
COMMENT ON COLUMN tls_second_opinion.version IS 'TLS version of the check (1.2 or 1.3): gnutls-cli is limited to it; testssl.sh picks it itself (read from its OpenSSL s_client output); sslyze checks resumption with TLS 1.2 and early data with 1.3; NULL when the target failed before any check or the version was not seen (status/error say why).';
COMMENT ON COLUMN tls_second_opinion.mechanism IS 'ticket (session_ticket extension / TLS 1.3 PSK), id (gnutls-cli: TLS 1.2 session ID, priority %NO_TICKETS; testssl.sh: OpenSSL s_client -no_ticket, a session-ID resumption only with version 1.2 - with 1.3 OpenSSL still resumes by PSK, and the TLS 1.3 checks of testssl.sh race the post-handshake ticket: scanners/tls_second_opinion/testssl.py; sslyze: TLS 1.2 without the session_ticket extension), lifetime-hint (lifetime_hint_s) or early-data (sslyze: early_data_accepted); NULL as version.';
COMMENT ON COLUMN tls_second_opinion.client IS 'The independent client and its version, e.g. gnutls-cli 3.7.9, testssl 3.0.8 or sslyze 6.3.1.';
COMMENT ON COLUMN tls_second_opinion.status IS 'success (the check has a verdict: resumed, lifetime_hint_s or early_data_accepted) or why not (application-error, blocked, ...).';
COMMENT ON COLUMN tls_second_opinion.resumed IS 'The client reported the second connection as resumed (gnutls-cli: *** This is a resumed session; testssl.sh: sessionresumption_ticket / sessionresumption_ID supported; sslyze: FULLY_ or PARTIALLY_SUPPORTED - its ticket check counts a resumption that brings a fresh ticket as none, sslyze.py); NULL without a verdict, for lifetime-hint and early-data.';
COMMENT ON COLUMN tls_second_opinion.early_data_accepted IS 'mechanism early-data (sslyze): the server accepted one byte of TLS 1.3 early data on a resumed connection (OpenSSL early data status ACCEPTED); NULL otherwise.';
COMMENT ON COLUMN tls_second_opinion.attempts IS 'sslyze: resumptions (id, ticket) or early-data attempts made; NULL for clients that try once.';
COMMENT ON COLUMN tls_second_opinion.resumptions IS 'sslyze: of attempts, the resumptions that succeeded; NULL otherwise.';
COMMENT ON COLUMN tls_second_opinion.connections IS 'TCP connections the client opened for the whole target (sslyze: every one granted through the run''s rate limiter, scanners/tls_second_opinion/sslyze_gate.py); the same on each row of the target; NULL where not counted (gnutls-cli: 2 per check, testssl.sh).';
