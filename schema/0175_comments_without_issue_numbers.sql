-- 0175_comments_without_issue_numbers: the data dictionary (docs/schema.md, `netsurvey db
-- docs`) is read by users, who cannot look up the issue tracker: these comments said
-- "(issue 24)" where they now say what it means (the server zoo's independent clients;
-- a failed resumption handshake gives no verdict). Same text otherwise.
COMMENT ON TABLE tls_second_opinion IS 'tls-second-opinion: per target, TLS version and mechanism the verdict of an independent client: gnutls-cli --resume (resumption), testssl.sh -S (resumption, ticket lifetime hint), sslyze --resum --early_data (TLS 1.2 resumption, TLS 1.3 early data); validates scan tls against the testbed''s server zoo (plot zoo-table).';
COMMENT ON TABLE quic_second_opinion IS 'quic-second-opinion: per target and fact the verdict of ngtcp2''s client (gtlsclient), three connections per target: a Version Negotiation probe, a fresh connection, a resumption; validates scan quic-discover / scan quic against the QUIC zoo (plot zoo-table).';
COMMENT ON TABLE dns_second_opinion IS 'scan dns-second-opinion: one question (hostname, type, with or without an ECS option) asked by kdig at an authoritative server, and what kdig read from the reply; validates scan dns-ttl / scan dns-ecs against the DNS zoo (plot zoo-table).';
COMMENT ON COLUMN tls_handshake.id_resumed IS 'TLS 1.2: an immediate resumption with the session ID (client tickets disabled) was accepted; NULL if not tried or the resumption handshake failed (timeout, reset: no verdict).';
COMMENT ON COLUMN tls_handshake.ticket_resumed IS 'An immediate resumption with the ticket was accepted; NULL if not tried (no ticket or --no-check-resumption) or the resumption handshake failed (timeout, reset: no verdict).';
