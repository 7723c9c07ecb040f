-- 0145 (issue 24): quinn joined the QUIC zoo; scanners/quic/tokens.py recognises its token
-- layout (exact length 46 / 58 bytes, no key id). The column's list of layouts says so.
COMMENT ON COLUMN quic_token.token_format IS 'Token layout recognised from its bytes (scanners/quic/tokens.py): netsurvey-testbed (the testbed''s aioquic server), ngtcp2, ngtcp2-retry, quinn (exact length), quic-go (length only: consistent with), unknown; NULL in rows written before migration 0105.';
