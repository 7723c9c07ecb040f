-- 0003_tls: TLS session resumption (thesis ch. 4.4.1, 4.5.1, 5.4.3): handshake
-- observations, resumption attempts and shared-state groups, plus one view per figure.

-- One full handshake with one address, SNI and pinned TLS version.
CREATE TABLE tls_handshake (
    run_id          bigint      NOT NULL REFERENCES scan_run(id) ON DELETE CASCADE,
    rank            integer,
    hostname        text        NOT NULL,
    address         inet,
    port            integer     NOT NULL,
    version         text        NOT NULL CHECK (version IN ('1.2', '1.3')),
    status          text        NOT NULL,
    error           text,
    negotiated      text,
    cipher          text,
    session_id_len  integer,
    ticket_count    integer     NOT NULL DEFAULT 0,
    ticket_lifetime integer,
    max_early_data  bigint,
    ticket          bytea,
    ticket_len      integer,
    key_name        bytea,
    ticket_format   text,
    cert_sha256     bytea,
    cert_issuer     text,
    cert_sans       text[],
    id_resumed      boolean,
    ticket_resumed  boolean,
    handshake_ms    double precision,
    observed_at     timestamptz NOT NULL DEFAULT now(),
    source          text        NOT NULL DEFAULT 'netsurvey'
);
COMMENT ON TABLE tls_handshake IS 'One full TLS handshake per (run, hostname/SNI, address, version); failures included with a reason. Filled by `scan tls` and by zgrab2 ingestion (source).';
COMMENT ON COLUMN tls_handshake.run_id IS 'scan_run that made the observation.';
COMMENT ON COLUMN tls_handshake.rank IS 'Rank of hostname in the target list (NULL for ad-hoc targets).';
COMMENT ON COLUMN tls_handshake.hostname IS 'Hostname sent as SNI (and checked against the certificate when verifying).';
COMMENT ON COLUMN tls_handshake.address IS 'Destination IPv4/IPv6 address (NULL if resolution failed).';
COMMENT ON COLUMN tls_handshake.port IS 'Destination TCP port.';
COMMENT ON COLUMN tls_handshake.version IS 'TLS version the client offered (min = max): 1.2 or 1.3.';
COMMENT ON COLUMN tls_handshake.status IS 'ScanStatus: success, connection-refused, connection-timeout, connection-closed, io-timeout, protocol-error, application-error, resolution-failed, blocked.';
COMMENT ON COLUMN tls_handshake.error IS 'Failure reason: tls-alert:<name>, bad-certificate: <why>, not-tls, reset, eof, timeout, refused, nxdomain, ...; on success NULL, or a note such as session-unavailable: <why> when the handshake succeeded but its session could not be exported.';
COMMENT ON COLUMN tls_handshake.negotiated IS 'Negotiated protocol version as OpenSSL names it (TLSv1.2, TLSv1.3).';
COMMENT ON COLUMN tls_handshake.cipher IS 'Negotiated cipher suite (OpenSSL name).';
COMMENT ON COLUMN tls_handshake.session_id_len IS 'TLS 1.2: length in bytes of the ServerHello session_id when the client offered no ticket (0 = no session ID support); NULL for TLS 1.3.';
COMMENT ON COLUMN tls_handshake.ticket_count IS 'Number of NewSessionTicket messages received (TLS 1.3: after the handshake, before the HTTP reply).';
COMMENT ON COLUMN tls_handshake.ticket_lifetime IS 'Seconds: ticket_lifetime_hint (TLS 1.2) or ticket_lifetime (TLS 1.3) of the first ticket.';
COMMENT ON COLUMN tls_handshake.max_early_data IS 'Bytes: max_early_data_size of the first TLS 1.3 ticket''s early_data extension; NULL if absent.';
COMMENT ON COLUMN tls_handshake.ticket IS 'Bytes of the first ticket.';
COMMENT ON COLUMN tls_handshake.ticket_len IS 'Length of the first ticket in bytes.';
COMMENT ON COLUMN tls_handshake.key_name IS 'First 16 bytes of the first ticket (the STEK key_name of RFC 5077), NULL when the ticket does not follow that structure.';
COMMENT ON COLUMN tls_handshake.ticket_format IS 'rfc5077 (with the 2-byte state length), rfc5077-openssl (key_name|iv|CBC blocks|mac) or opaque (e.g. TLS 1.3 stateful 32-byte ticket).';
COMMENT ON COLUMN tls_handshake.cert_sha256 IS 'SHA-256 over the DER leaf certificate.';
COMMENT ON COLUMN tls_handshake.cert_issuer IS 'Issuer DN of the leaf certificate (RFC 4514).';
COMMENT ON COLUMN tls_handshake.cert_sans IS 'DNS names in the leaf certificate''s subjectAltName.';
COMMENT ON COLUMN tls_handshake.id_resumed IS 'TLS 1.2: an immediate resumption with the session ID (client tickets disabled) was accepted; NULL if not tried.';
COMMENT ON COLUMN tls_handshake.ticket_resumed IS 'An immediate resumption with the ticket was accepted; NULL if not tried (no ticket or --no-check-resumption).';
COMMENT ON COLUMN tls_handshake.handshake_ms IS 'Milliseconds from TCP connect to handshake completion.';
COMMENT ON COLUMN tls_handshake.observed_at IS 'When the handshake was made.';
COMMENT ON COLUMN tls_handshake.source IS 'Engine that made the observation: netsurvey or zgrab2.';
CREATE INDEX tls_handshake_run ON tls_handshake (run_id);
CREATE INDEX tls_handshake_host ON tls_handshake (hostname, observed_at);

-- One attempt to resume an earlier session (lifetime and shared-state probes).
CREATE TABLE tls_resumption (
    run_id         bigint      NOT NULL REFERENCES scan_run(id) ON DELETE CASCADE,
    mechanism      text        NOT NULL CHECK (mechanism IN ('id', 'ticket')),
    version        text        NOT NULL CHECK (version IN ('1.2', '1.3')),
    origin_host    text        NOT NULL,
    origin_address inet        NOT NULL,
    host           text        NOT NULL,
    address        inet        NOT NULL,
    age_s          double precision NOT NULL,
    resumed        boolean     NOT NULL,
    status         text        NOT NULL,
    error          text,
    chain_index    integer     NOT NULL DEFAULT 0,
    key_name       bytea,
    attempted_at   timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE tls_resumption IS 'One resumption attempt: a session established at origin_host/origin_address presented at host/address after age_s seconds.';
COMMENT ON COLUMN tls_resumption.run_id IS 'scan_run (kind tls-lifetime or tls-shared).';
COMMENT ON COLUMN tls_resumption.mechanism IS 'id = TLS 1.2 session ID with client tickets disabled; ticket = session ticket (TLS 1.2) / PSK ticket (TLS 1.3).';
COMMENT ON COLUMN tls_resumption.version IS 'TLS version of both handshakes.';
COMMENT ON COLUMN tls_resumption.origin_host IS 'SNI of the initial handshake that created the session.';
COMMENT ON COLUMN tls_resumption.origin_address IS 'Address of the initial handshake.';
COMMENT ON COLUMN tls_resumption.host IS 'SNI presented with the session (= origin_host in the lifetime probe).';
COMMENT ON COLUMN tls_resumption.address IS 'Address the session was presented to.';
COMMENT ON COLUMN tls_resumption.age_s IS 'Seconds from the completion of the handshake that produced the presented session to this attempt.';
COMMENT ON COLUMN tls_resumption.resumed IS 'True if the server accepted the session (abbreviated handshake / PSK accepted).';
COMMENT ON COLUMN tls_resumption.status IS 'ScanStatus of the attempt''s handshake.';
COMMENT ON COLUMN tls_resumption.error IS 'Failure reason of the attempt''s handshake; NULL on success.';
COMMENT ON COLUMN tls_resumption.chain_index IS '--chain: 0 for the first resumption, n for the n-th in a chain of resumptions each presenting the previous one''s session; 0 otherwise.';
COMMENT ON COLUMN tls_resumption.key_name IS 'key_name of the presented ticket (NULL for session IDs and opaque tickets).';
COMMENT ON COLUMN tls_resumption.attempted_at IS 'When the attempt was made.';
CREATE INDEX tls_resumption_run ON tls_resumption (run_id, origin_host);

-- Membership of hostnames in groups that share TLS state (Fig 4.9, Table 5.3).
CREATE TABLE tls_shared_group (
    run_id    bigint  NOT NULL REFERENCES scan_run(id) ON DELETE CASCADE,
    kind      text    NOT NULL CHECK (kind IN ('resumption', 'san', 'union')),
    group_id  integer NOT NULL,
    hostname  text    NOT NULL,
    PRIMARY KEY (run_id, kind, hostname)
);
COMMENT ON TABLE tls_shared_group IS 'One row per hostname and grouping: connected components of successful cross-host resumptions (resumption), of certificate SAN trust (san) and of their union (union). Singletons included.';
COMMENT ON COLUMN tls_shared_group.run_id IS 'scan_run (kind tls-shared).';
COMMENT ON COLUMN tls_shared_group.kind IS 'resumption: A''s session resumed at B (either mechanism); san: B is in the SAN list of A''s certificate (or vice versa); union: both edges.';
COMMENT ON COLUMN tls_shared_group.group_id IS 'Group number within (run, kind), 1 = largest group.';
COMMENT ON COLUMN tls_shared_group.hostname IS 'Member hostname.';

-- Fig 4.5: session ID / ticket support per host and version (any address).
CREATE VIEW tls_support_v AS
SELECT run_id, hostname, min(rank) AS rank, version,
       bool_or(session_id_len > 0 OR id_resumed) AS supports_id,
       bool_or(ticket_count > 0) AS supports_ticket,
       bool_or(id_resumed) AS id_resumed,
       bool_or(ticket_resumed) AS ticket_resumed
FROM tls_handshake WHERE status = 'success'
GROUP BY run_id, hostname, version;
COMMENT ON VIEW tls_support_v IS 'Fig 4.5: per run, host and version whether session IDs (ServerHello session_id or ID resumption) and tickets are supported.';

-- Fig 4.6/4.7: hinted lifetimes, one value per host and version.
CREATE VIEW tls_lifetime_hint_v AS
SELECT run_id, hostname, version, max(ticket_lifetime) AS lifetime_s
FROM tls_handshake WHERE status = 'success' AND ticket_count > 0
GROUP BY run_id, hostname, version;
COMMENT ON VIEW tls_lifetime_hint_v IS 'Fig 4.6-4.7: ticket lifetime hint (1.2) / ticket_lifetime (1.3) in seconds per run, host and version.';

-- Fig 4.6 (measured) / 4.8: measured maximum resumption lifetime per host and mechanism.
CREATE VIEW tls_lifetime_measured_v AS
SELECT r.run_id, r.origin_host AS hostname, r.mechanism, r.version,
       max(r.age_s) FILTER (WHERE r.resumed) AS max_resumed_age_s,
       min(r.age_s) FILTER (WHERE NOT r.resumed AND r.status = 'success') AS min_failed_age_s,
       count(*) AS attempts
FROM tls_resumption r JOIN scan_run s ON s.id = r.run_id AND s.kind = 'tls-lifetime'
WHERE r.chain_index = 0 OR (s.parameters->>'chain')::boolean
GROUP BY r.run_id, r.origin_host, r.mechanism, r.version;
COMMENT ON VIEW tls_lifetime_measured_v IS 'Fig 4.6 measured line / Fig 4.8: largest age (s) at which a session was still resumed and smallest age at which it was refused, per run, host, mechanism and version.';

-- Fig 4.10: how long each host keeps one key_name (over repeated survey runs).
CREATE VIEW tls_key_name_span_v AS
SELECT hostname, version, key_name, min(observed_at) AS first_seen, max(observed_at) AS last_seen,
       extract(epoch FROM max(observed_at) - min(observed_at)) AS span_s,
       count(DISTINCT run_id) AS runs
FROM tls_handshake WHERE key_name IS NOT NULL
GROUP BY hostname, version, key_name;
COMMENT ON VIEW tls_key_name_span_v IS 'Fig 4.10: per host, version and key_name the first and last observation and the span in seconds (a lower bound of the STEK lifetime; add one scan interval for an upper bound).';

-- Fig 4.9 / Table 5.3: group sizes.
CREATE VIEW tls_shared_group_size_v AS
SELECT run_id, kind, group_id, count(*) AS size, array_agg(hostname ORDER BY hostname) AS members
FROM tls_shared_group GROUP BY run_id, kind, group_id;
COMMENT ON VIEW tls_shared_group_size_v IS 'Fig 4.9 / Table 5.3: size and members of each shared-state group per run and kind.';
