-- 0065_tls_second_opinion_testssl (issue 24): testssl.sh as a further second opinion
-- (its ticket lifetime hint needs a column), and tls_handshake's resumption verdicts are
-- NULL when the resumption attempt itself failed (a timeout is no verdict).

ALTER TABLE tls_second_opinion DROP CONSTRAINT tls_second_opinion_mechanism_check;
ALTER TABLE tls_second_opinion ADD CONSTRAINT tls_second_opinion_mechanism_check
    CHECK (mechanism IN ('ticket', 'id', 'lifetime-hint'));
ALTER TABLE tls_second_opinion ADD COLUMN lifetime_hint_s bigint;

COMMENT ON TABLE tls_second_opinion IS 'tls-second-opinion: per target, TLS version and mechanism the verdict of an independent client: gnutls-cli --resume (resumption), testssl.sh -S (resumption, ticket lifetime hint) (issue 24).';
COMMENT ON COLUMN tls_second_opinion.version IS 'TLS version of the check (1.2 or 1.3): gnutls-cli is limited to it; testssl.sh picks it itself (read from its OpenSSL s_client output); NULL when the target failed before any check or the version was not seen (status/error say why).';
COMMENT ON COLUMN tls_second_opinion.mechanism IS 'ticket (session_ticket extension / TLS 1.3 PSK), id (gnutls-cli: TLS 1.2 session ID, priority %NO_TICKETS; testssl.sh: OpenSSL s_client -no_ticket, a session-ID resumption only with version 1.2 - with 1.3 OpenSSL still resumes by PSK, and the TLS 1.3 checks of testssl.sh race the post-handshake ticket: scanners/tls_second_opinion/testssl.py), or lifetime-hint (lifetime_hint_s); NULL as version.';
COMMENT ON COLUMN tls_second_opinion.client IS 'The independent client and its version, e.g. gnutls-cli 3.7.9 or testssl 3.0.8.';
COMMENT ON COLUMN tls_second_opinion.status IS 'success (the check has a verdict: resumed or lifetime_hint_s) or why not (application-error, blocked, ...).';
COMMENT ON COLUMN tls_second_opinion.resumed IS 'The client reported the second connection as resumed (gnutls-cli: *** This is a resumed session; testssl.sh: sessionresumption_ticket / sessionresumption_ID supported); NULL without a verdict and for lifetime-hint.';
COMMENT ON COLUMN tls_second_opinion.lifetime_hint_s IS 'mechanism lifetime-hint: the session ticket lifetime (TLS 1.2 hint, TLS 1.3 ticket_lifetime) testssl.sh reported, seconds; NULL otherwise.';
COMMENT ON COLUMN tls_handshake.id_resumed IS 'TLS 1.2: an immediate resumption with the session ID (client tickets disabled) was accepted; NULL if not tried or the resumption handshake failed (timeout, reset: no verdict; issue 24).';
COMMENT ON COLUMN tls_handshake.ticket_resumed IS 'An immediate resumption with the ticket was accepted; NULL if not tried (no ticket or --no-check-resumption) or the resumption handshake failed (timeout, reset: no verdict; issue 24).';
