-- Issue 22 (import fidelity): hosts with invalid certificates are measured regardless (the
-- thesis did not abort on bad certificates); whether the certificate verified, and why
-- not, is recorded per handshake so that figures can filter on it.
ALTER TABLE tls_handshake ADD COLUMN cert_verified boolean, ADD COLUMN cert_error text;
COMMENT ON COLUMN tls_handshake.cert_verified IS 'The certificate chain and name verified against the system CA store (netsurvey) or zgrab2''s browser_trusted; NULL when verification was off (--no-verify) or no certificate was seen. A false value still comes with the session data of an unverified handshake.';
COMMENT ON COLUMN tls_handshake.cert_error IS 'Why verification failed: OpenSSL''s verify message (netsurvey) or zgrab2''s browser_error; NULL when it verified or was not checked.';
