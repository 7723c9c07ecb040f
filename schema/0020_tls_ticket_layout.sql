-- 0020_tls_ticket_layout (issue 24): which implementation family's ticket layout each
-- probe saw, and how long its key id is. STEK rotation (Fig 4.10) is read only from
-- layouts that carry a key id: a Go ticket starts with a random IV, and reading its first
-- 16 bytes as a key name invented a key rotation on every ticket.

ALTER TABLE tls_handshake
    ADD COLUMN ticket_family     text CHECK (ticket_family IN ('openssl', 'gnutls', 'rfc5077', 'rustls', 'jsse', 'go', 'unknown')),
    ADD COLUMN ticket_key_id_len integer CHECK (ticket_key_id_len >= 0),
    ADD COLUMN ticket_layout_basis integer CHECK (ticket_layout_basis >= 1);

COMMENT ON COLUMN tls_handshake.ticket_family IS 'Ticket layout family inferred from the tickets of this probe (scanners/tls/wire.py infer_layout): openssl (key_name[16] iv[16] CBC HMAC-SHA256[32]: OpenSSL, BoringSSL, rustls/aws-lc-rs), gnutls (key_name[16] IV[16] len[2] CBC HMAC-SHA1[20]), rfc5077 (RFC 5077 section 4 with a 32-byte MAC), rustls (key_name[16] nonce[12] AEAD: rustls/ring), jsse (key_id[4] iv[16] AES-GCM), go (iv[16] AES-CTR HMAC-SHA256[32], no key name: Go >= 1.21) or unknown; NULL without tickets or for rows from before migration 0020.';
COMMENT ON COLUMN tls_handshake.ticket_key_id_len IS 'Bytes of the key id at the start of each ticket under ticket_family (16, 4 for jsse, 0 where the layout has none: no STEK rotation can be read); NULL without tickets or for rows from before migration 0020.';
COMMENT ON COLUMN tls_handshake.ticket_layout_basis IS 'Tickets the layout inference compared (1: one ticket, structure only, which cannot tell an openssl key name from a Go random IV; >= 2: the bytes equal across tickets of one server decide).';
COMMENT ON COLUMN tls_handshake.key_name IS 'Key id of the first ticket under the inferred layout (ticket_key_id_len bytes: 16 for openssl/gnutls/rfc5077/rustls, 4 for jsse); NULL when the layout has no key id (go, unknown) or without tickets. Rows from before migration 0020: first 16 bytes of an RFC 5077-shaped ticket.';

-- Fig 4.10: rotation only where the layout has a key id (rows from before 0020 have no
-- layout and keep their old meaning).
CREATE OR REPLACE VIEW tls_key_name_span_v AS
SELECT hostname, version, key_name, min(observed_at) AS first_seen, max(observed_at) AS last_seen,
       extract(epoch FROM max(observed_at) - min(observed_at)) AS span_s,
       count(DISTINCT run_id) AS runs
FROM tls_handshake WHERE key_name IS NOT NULL AND coalesce(ticket_key_id_len, 16) > 0
GROUP BY hostname, version, key_name;
COMMENT ON VIEW tls_key_name_span_v IS 'Fig 4.10: per host, version and ticket key id the first and last observation and the span in seconds (a lower bound of the STEK lifetime; add one scan interval for an upper bound). Only layouts with a key id (ticket_key_id_len > 0).';
COMMENT ON COLUMN tls_key_name_span_v.key_name IS 'STEK key id (tls_handshake.key_name: 16 bytes, 4 for jsse).';
