-- 0105_quic_token_layout: the layout of each NEW_TOKEN token (issue 24, item 5: QUIC token
-- parsing that does not assume our own server's format). scanners/quic/tokens.py
-- recognises the layouts of the testbed's server, ngtcp2 and quic-go from their sources;
-- quic-turnover takes the key id length from a recognised layout instead of reading a
-- constant format byte (ngtcp2's 0x36 magic) as a key identifier.

ALTER TABLE quic_token
    ADD COLUMN token_format text,
    ADD COLUMN key_id_len   integer;
COMMENT ON COLUMN quic_token.token_format IS 'Token layout recognised from its bytes (scanners/quic/tokens.py): netsurvey-testbed (the testbed''s aioquic server), ngtcp2, ngtcp2-retry, quic-go (length only: consistent with), unknown; NULL in rows written before migration 0105.';
COMMENT ON COLUMN quic_token.key_id_len IS 'Bytes of key identifier the recognised layout carries (0 = the layout has none); NULL = unknown layout (quic-turnover then infers it from shared prefixes).';
ALTER TABLE quic_turnover_host ADD COLUMN token_format text;
COMMENT ON COLUMN quic_turnover_host.token_format IS 'Layout of this address''s tokens when all of them have one recognised layout (scanners/quic/tokens.py), else ''mixed'' or ''unknown''; token_key_prefix_len comes from that layout when it is known. NULL without tokens or before migration 0105.';
