-- 0100_tls_ticket_family_boringssl (issue 24, TLS zoo 2): BoringSSL's tickets have OpenSSL's
-- shape (key_name[16] iv[16] CBC HMAC-SHA256[32]) but come in TLS 1.3 NewSessionTickets
-- with a 1-byte ticket_nonce (OpenSSL: 8, rustls: 32); scanners/tls/wire.py infer_layout
-- now names them 'boringssl'.

ALTER TABLE tls_handshake DROP CONSTRAINT IF EXISTS tls_handshake_ticket_family_check;
ALTER TABLE tls_handshake ADD CONSTRAINT tls_handshake_ticket_family_check
    CHECK (ticket_family IN ('openssl', 'gnutls', 'rfc5077', 'rustls', 'jsse', 'go', 'boringssl', 'unknown'));

COMMENT ON COLUMN tls_handshake.ticket_family IS 'Ticket layout family inferred from the tickets of this probe (scanners/tls/wire.py infer_layout): openssl (key_name[16] iv[16] CBC HMAC-SHA256[32]: OpenSSL, H2O, rustls/aws-lc-rs), boringssl (the openssl layout with AES-128-CBC, told apart by its 1-byte TLS 1.3 ticket_nonce; a TLS 1.2 probe is relabelled when its key name equals one of the target''s boringssl TLS 1.3 tickets; rows from before migration 0100 say openssl), gnutls (key_name[16] IV[16] len[2] CBC HMAC-SHA1[20]), rfc5077 (RFC 5077 section 4 with a 32-byte MAC), rustls (key_name[16] nonce[12] AEAD: rustls/ring), jsse (key_id[4] iv[16] AES-GCM), go (iv[16] AES-CTR HMAC-SHA256[32], no key name: Go >= 1.21) or unknown; NULL without tickets or for rows from before migration 0020.';
