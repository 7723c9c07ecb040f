-- 0004_quic: QUIC discovery, handshakes, NEW_TOKEN tokens, session tickets and their
-- turnover (issue 6; thesis ch. 6.4.2 with IETF QUIC's tokens/tickets in place of gQUIC's
-- source-address token / server config). Times are timestamptz (UTC); durations carry
-- their unit in the column name (_s seconds, _ms milliseconds); lengths are bytes.

-- One row per (hostname, address) of `netsurvey scan quic-discover`.
CREATE TABLE quic_discovery (
    run_id                  bigint      NOT NULL REFERENCES scan_run(id) ON DELETE CASCADE,
    rank                    integer,
    hostname                text,
    address                 inet,
    port                    integer     NOT NULL,
    status                  text        NOT NULL,
    error                   text,
    probed_at               timestamptz NOT NULL,
    vn_answer               text,
    vn_versions             bigint[],
    vn_rtt_ms               float8,
    vn_reply_len            integer,
    alt_svc                 text,
    alt_svc_h3              boolean,
    alt_svc_h3_ma_s         integer,
    https_status            integer,
    https_error             text,
    https_rr_alpn           text[],
    https_rr_no_default_alpn boolean,
    https_rr_error          text
);
COMMENT ON TABLE quic_discovery IS 'QUIC discovery of one hostname at one address: Version Negotiation probe, Alt-Svc over HTTPS/TCP, HTTPS DNS record.';
COMMENT ON COLUMN quic_discovery.run_id IS 'scan_run.id of the quic-discover run.';
COMMENT ON COLUMN quic_discovery.rank IS 'Rank of the hostname in the target list (1 = most popular).';
COMMENT ON COLUMN quic_discovery.hostname IS 'Hostname from the target list.';
COMMENT ON COLUMN quic_discovery.address IS 'Address probed (A or AAAA of the hostname); NULL if resolution failed.';
COMMENT ON COLUMN quic_discovery.port IS 'UDP port of the probe and TCP port of the HTTPS request.';
COMMENT ON COLUMN quic_discovery.status IS 'ScanStatus: success, resolution-failed, blocked, ... (success = all three probes ran).';
COMMENT ON COLUMN quic_discovery.error IS 'Short error text for anything but success.';
COMMENT ON COLUMN quic_discovery.probed_at IS 'When the probes of this row started.';
COMMENT ON COLUMN quic_discovery.vn_answer IS 'Reply to an Initial with the reserved version 0x1a2a3a4a: version-negotiation, none (silence), refused (ICMP unreachable), garbage (no valid VN for our connection IDs).';
COMMENT ON COLUMN quic_discovery.vn_versions IS 'Versions listed in the Version Negotiation packet, in server order (1 = QUIC v1, 1798521807 = 0x6b3343cf = QUIC v2).';
COMMENT ON COLUMN quic_discovery.vn_rtt_ms IS 'Probe to first reply, ms.';
COMMENT ON COLUMN quic_discovery.vn_reply_len IS 'Length of the first reply, bytes.';
COMMENT ON COLUMN quic_discovery.alt_svc IS 'Alt-Svc header value(s) of HEAD / over HTTPS/TCP (joined by ", "); NULL if absent.';
COMMENT ON COLUMN quic_discovery.alt_svc_h3 IS 'Alt-Svc offers an h3 alternative.';
COMMENT ON COLUMN quic_discovery.alt_svc_h3_ma_s IS 'max-age (ma) of the h3 alternative, s (86400 when not given, RFC 7838).';
COMMENT ON COLUMN quic_discovery.https_status IS 'HTTP status of the HTTPS/TCP response; NULL if none.';
COMMENT ON COLUMN quic_discovery.https_error IS 'Why the HTTPS/TCP request failed (refused, timeout, SSLError, ...); NULL on success.';
COMMENT ON COLUMN quic_discovery.https_rr_alpn IS 'ALPN ids of the HTTPS (type 65) DNS record of the hostname; NULL without a record.';
COMMENT ON COLUMN quic_discovery.https_rr_no_default_alpn IS 'The HTTPS record carries no-default-alpn.';
COMMENT ON COLUMN quic_discovery.https_rr_error IS 'nxdomain, nodata, timeout, ... of the HTTPS record lookup; NULL if found.';
CREATE INDEX quic_discovery_run ON quic_discovery (run_id, hostname);

-- One row per QUIC connection (scan quic and scan quic-turnover).
CREATE TABLE quic_connection (
    run_id                    bigint      NOT NULL REFERENCES scan_run(id) ON DELETE CASCADE,
    conn_id                   integer     NOT NULL,
    rank                      integer,
    hostname                  text,
    address                   inet,
    port                      integer     NOT NULL,
    client_port               integer,
    purpose                   text        NOT NULL CHECK (purpose IN ('fresh', 'resume', 'represent')),
    round                     integer,
    status                    text        NOT NULL,
    error                     text,
    started_at                timestamptz NOT NULL,
    version                   bigint,
    alpn                      text,
    retry                     boolean,
    handshake_ms              float8,
    http_status               integer,
    presented_token_conn_id   integer,
    presented_token_len       integer,
    presented_token_age_s     float8,
    presented_ticket_conn_id  integer,
    presented_ticket_prefix   bytea,
    presented_ticket_age_s    float8,
    presented_beyond_lifetime boolean,
    session_resumed           boolean,
    early_data_sent           boolean,
    early_data_accepted       boolean,
    transport_parameters      jsonb,
    cert_sha256               text,
    cert_subject              text,
    cert_issuer               text,
    cert_not_after            timestamptz,
    cert_sans                 text[],
    n_tokens                  integer,
    n_tickets                 integer,
    close_code                bigint,
    close_reason              text,
    PRIMARY KEY (run_id, conn_id)
);
COMMENT ON TABLE quic_connection IS 'One QUIC connection (aioquic client, one HTTP/3 GET) to one address, with what it presented and what the server did.';
COMMENT ON COLUMN quic_connection.run_id IS 'scan_run.id (kind quic or quic-turnover).';
COMMENT ON COLUMN quic_connection.conn_id IS 'Connection number within the run (tokens/tickets refer to it).';
COMMENT ON COLUMN quic_connection.rank IS 'Rank of the hostname in the target list.';
COMMENT ON COLUMN quic_connection.hostname IS 'Hostname (SNI and :authority).';
COMMENT ON COLUMN quic_connection.address IS 'Server address connected to.';
COMMENT ON COLUMN quic_connection.port IS 'UDP port of the server.';
COMMENT ON COLUMN quic_connection.client_port IS 'Our UDP source port (links the row to server-side logs).';
COMMENT ON COLUMN quic_connection.purpose IS 'fresh: no state presented; resume: token and ticket of the fresh connection presented at once; represent: an older token/ticket presented after an age (turnover).';
COMMENT ON COLUMN quic_connection.round IS 'Turnover round (0-based); NULL for scan quic.';
COMMENT ON COLUMN quic_connection.status IS 'ScanStatus: success (handshake completed), connection-refused (ICMP), io-timeout (no handshake), application-error (server CONNECTION_CLOSE with a TLS alert), protocol-error (other CONNECTION_CLOSE), ...';
COMMENT ON COLUMN quic_connection.error IS 'Short error text for anything but success.';
COMMENT ON COLUMN quic_connection.started_at IS 'When the first Initial was sent.';
COMMENT ON COLUMN quic_connection.version IS 'Negotiated QUIC version (1 = v1).';
COMMENT ON COLUMN quic_connection.alpn IS 'Negotiated ALPN.';
COMMENT ON COLUMN quic_connection.retry IS 'The server answered with a Retry packet (address validation forced).';
COMMENT ON COLUMN quic_connection.handshake_ms IS 'First Initial to handshake completion, ms (includes the Retry round trip).';
COMMENT ON COLUMN quic_connection.http_status IS 'HTTP/3 status of GET /.';
COMMENT ON COLUMN quic_connection.presented_token_conn_id IS 'Connection that received the NEW_TOKEN token presented in the first Initial; NULL if none.';
COMMENT ON COLUMN quic_connection.presented_token_len IS 'Length of the presented token, bytes.';
COMMENT ON COLUMN quic_connection.presented_token_age_s IS 'Age of the presented token (now - its arrival), s.';
COMMENT ON COLUMN quic_connection.presented_ticket_conn_id IS 'Connection that received the presented session ticket; NULL if none.';
COMMENT ON COLUMN quic_connection.presented_ticket_prefix IS 'First 16 bytes of the presented ticket (PSK identity).';
COMMENT ON COLUMN quic_connection.presented_ticket_age_s IS 'Age of the presented ticket (now - its arrival), s.';
COMMENT ON COLUMN quic_connection.presented_beyond_lifetime IS 'The ticket was presented after its advertised lifetime (clients must not; we test whether servers enforce it).';
COMMENT ON COLUMN quic_connection.session_resumed IS 'The server accepted the presented ticket (PSK resumption).';
COMMENT ON COLUMN quic_connection.early_data_sent IS 'The GET was sent as 0-RTT data.';
COMMENT ON COLUMN quic_connection.early_data_accepted IS 'The server accepted the 0-RTT data.';
COMMENT ON COLUMN quic_connection.transport_parameters IS 'Server transport parameters as received (names of RFC 9000 section 18.2; times in ms as on the wire; byte strings as hex).';
COMMENT ON COLUMN quic_connection.cert_sha256 IS 'SHA-256 of the leaf certificate (DER), hex; recorded, not verified.';
COMMENT ON COLUMN quic_connection.cert_subject IS 'Subject (RFC 4514).';
COMMENT ON COLUMN quic_connection.cert_issuer IS 'Issuer (RFC 4514).';
COMMENT ON COLUMN quic_connection.cert_not_after IS 'Certificate expiry.';
COMMENT ON COLUMN quic_connection.cert_sans IS 'DNS names of the subjectAltName.';
COMMENT ON COLUMN quic_connection.n_tokens IS 'NEW_TOKEN frames received on this connection.';
COMMENT ON COLUMN quic_connection.n_tickets IS 'NewSessionTicket messages received on this connection.';
COMMENT ON COLUMN quic_connection.close_code IS 'Error code of the server''s CONNECTION_CLOSE (0x100-0x1ff: TLS alert 0x00-0xff); NULL if the server did not close.';
COMMENT ON COLUMN quic_connection.close_reason IS 'Reason phrase of the server''s CONNECTION_CLOSE.';
CREATE INDEX quic_connection_host ON quic_connection (run_id, hostname, address);

-- One row per NEW_TOKEN token received.
CREATE TABLE quic_token (
    run_id             bigint      NOT NULL REFERENCES scan_run(id) ON DELETE CASCADE,
    conn_id            integer     NOT NULL,
    seq                integer     NOT NULL,
    hostname           text,
    address            inet,
    received_at        timestamptz NOT NULL,
    after_handshake_ms float8      NOT NULL,
    token_len          integer     NOT NULL,
    token              bytea       NOT NULL,
    key_prefix         bytea,
    PRIMARY KEY (run_id, conn_id, seq)
);
COMMENT ON TABLE quic_token IS 'NEW_TOKEN address-validation tokens (RFC 9000 section 8.1.3) received: the IETF analogue of gQUIC''s source-address token.';
COMMENT ON COLUMN quic_token.run_id IS 'scan_run.id.';
COMMENT ON COLUMN quic_token.conn_id IS 'Connection that received it (quic_connection.conn_id).';
COMMENT ON COLUMN quic_token.seq IS 'Order among the tokens of that connection (0-based).';
COMMENT ON COLUMN quic_token.hostname IS 'Hostname of the connection.';
COMMENT ON COLUMN quic_token.address IS 'Server address of the connection.';
COMMENT ON COLUMN quic_token.received_at IS 'Arrival time.';
COMMENT ON COLUMN quic_token.after_handshake_ms IS 'Arrival after handshake completion, ms.';
COMMENT ON COLUMN quic_token.token_len IS 'Token length, bytes.';
COMMENT ON COLUMN quic_token.token IS 'Token bytes.';
COMMENT ON COLUMN quic_token.key_prefix IS 'Key identifier inferred by quic-turnover: the leading bytes shared by tokens issued in the same round (see scanners/quic/README.md); NULL outside turnover runs.';

-- One row per TLS 1.3 session ticket received.
CREATE TABLE quic_ticket (
    run_id             bigint      NOT NULL REFERENCES scan_run(id) ON DELETE CASCADE,
    conn_id            integer     NOT NULL,
    seq                integer     NOT NULL,
    hostname           text,
    address            inet,
    received_at        timestamptz NOT NULL,
    after_handshake_ms float8      NOT NULL,
    lifetime_s         bigint      NOT NULL,
    max_early_data     bigint,
    ticket_len         integer     NOT NULL,
    ticket             bytea       NOT NULL,
    ticket_prefix      bytea       NOT NULL,
    key_prefix         bytea,
    PRIMARY KEY (run_id, conn_id, seq)
);
COMMENT ON TABLE quic_ticket IS 'TLS 1.3 NewSessionTicket messages received over QUIC: the analogue of gQUIC''s server config (resumption and 0-RTT state).';
COMMENT ON COLUMN quic_ticket.run_id IS 'scan_run.id.';
COMMENT ON COLUMN quic_ticket.conn_id IS 'Connection that received it.';
COMMENT ON COLUMN quic_ticket.seq IS 'Order among the tickets of that connection (0-based).';
COMMENT ON COLUMN quic_ticket.hostname IS 'Hostname of the connection.';
COMMENT ON COLUMN quic_ticket.address IS 'Server address of the connection.';
COMMENT ON COLUMN quic_ticket.received_at IS 'Arrival time.';
COMMENT ON COLUMN quic_ticket.after_handshake_ms IS 'Arrival after handshake completion, ms.';
COMMENT ON COLUMN quic_ticket.lifetime_s IS 'ticket_lifetime advertised by the server, s (the analogue of gQUIC''s STTL).';
COMMENT ON COLUMN quic_ticket.max_early_data IS 'max_early_data_size of the early_data extension, bytes; NULL = 0-RTT not offered.';
COMMENT ON COLUMN quic_ticket.ticket_len IS 'Ticket length, bytes.';
COMMENT ON COLUMN quic_ticket.ticket IS 'Ticket (PSK identity) bytes.';
COMMENT ON COLUMN quic_ticket.ticket_prefix IS 'First 16 bytes of the ticket (the slot RFC 5077 gives the key name).';
COMMENT ON COLUMN quic_ticket.key_prefix IS 'Key identifier inferred by quic-turnover (leading bytes shared by tickets of one round); NULL outside turnover runs.';

-- One row per (host, address) of a quic-turnover run: what the repeated connections found.
CREATE TABLE quic_turnover_host (
    run_id                   bigint  NOT NULL REFERENCES scan_run(id) ON DELETE CASCADE,
    rank                     integer,
    hostname                 text,
    address                  inet    NOT NULL,
    every_s                  float8  NOT NULL,
    rounds                   integer NOT NULL,
    observed_s               float8  NOT NULL,
    connections_ok           integer NOT NULL,
    retry_on_fresh           boolean,
    tokens_issued            boolean,
    token_lengths            integer[],
    token_key_prefix_len     integer,
    token_keys_seen          integer,
    token_key_changes        integer,
    token_key_period_s       float8,
    token_accept_max_age_s   float8,
    token_reject_min_age_s   float8,
    tickets_issued           boolean,
    ticket_lifetime_s        bigint,
    ticket_max_early_data    bigint,
    ticket_lengths           integer[],
    ticket_key_prefix_len    integer,
    ticket_keys_seen         integer,
    ticket_key_changes       integer,
    ticket_key_period_s      float8,
    ticket_accept_max_age_s  float8,
    ticket_reject_min_age_s  float8,
    zero_rtt_accept_max_age_s float8,
    zero_rtt_reject_min_age_s float8,
    PRIMARY KEY (run_id, address)
);
COMMENT ON TABLE quic_turnover_host IS 'Per host address of a quic-turnover run: token/ticket acceptance lifetimes and key turnover (the analogue of the thesis''s STTL and server-config turnover).';
COMMENT ON COLUMN quic_turnover_host.run_id IS 'scan_run.id of the quic-turnover run.';
COMMENT ON COLUMN quic_turnover_host.rank IS 'Rank of the hostname in the target list.';
COMMENT ON COLUMN quic_turnover_host.hostname IS 'Hostname.';
COMMENT ON COLUMN quic_turnover_host.address IS 'Server address.';
COMMENT ON COLUMN quic_turnover_host.every_s IS 'Interval between rounds, s.';
COMMENT ON COLUMN quic_turnover_host.rounds IS 'Rounds run.';
COMMENT ON COLUMN quic_turnover_host.observed_s IS 'First to last round start, s.';
COMMENT ON COLUMN quic_turnover_host.connections_ok IS 'Connections with a completed handshake.';
COMMENT ON COLUMN quic_turnover_host.retry_on_fresh IS 'Connections without a token were answered with Retry (then token acceptance is observable as "no Retry").';
COMMENT ON COLUMN quic_turnover_host.tokens_issued IS 'At least one NEW_TOKEN token was received.';
COMMENT ON COLUMN quic_turnover_host.token_lengths IS 'Distinct token lengths seen, bytes (more than one = format change).';
COMMENT ON COLUMN quic_turnover_host.token_key_prefix_len IS 'Length of the key identifier in tokens, bytes: the most common length of the prefix shared by tokens issued in one round (0 = none visible).';
COMMENT ON COLUMN quic_turnover_host.token_keys_seen IS 'Distinct token key identifiers seen.';
COMMENT ON COLUMN quic_turnover_host.token_key_changes IS 'Times the key identifier of newly issued tokens changed.';
COMMENT ON COLUMN quic_turnover_host.token_key_period_s IS 'Median time between key changes, s (NULL with fewer than two changes); accurate to one interval.';
COMMENT ON COLUMN quic_turnover_host.token_accept_max_age_s IS 'Largest age at which a presented token was accepted (no Retry), s; NULL if unobservable (the server never forces Retry).';
COMMENT ON COLUMN quic_turnover_host.token_reject_min_age_s IS 'Smallest age at which a presented token was refused (Retry), s; NULL if none was (the lifetime is at least token_accept_max_age_s).';
COMMENT ON COLUMN quic_turnover_host.tickets_issued IS 'At least one session ticket was received.';
COMMENT ON COLUMN quic_turnover_host.ticket_lifetime_s IS 'Largest advertised ticket_lifetime, s.';
COMMENT ON COLUMN quic_turnover_host.ticket_max_early_data IS 'Largest max_early_data_size advertised, bytes; NULL = never offered 0-RTT.';
COMMENT ON COLUMN quic_turnover_host.ticket_lengths IS 'Distinct ticket lengths seen, bytes.';
COMMENT ON COLUMN quic_turnover_host.ticket_key_prefix_len IS 'Length of the key identifier in tickets, bytes (as for tokens).';
COMMENT ON COLUMN quic_turnover_host.ticket_keys_seen IS 'Distinct ticket key identifiers seen.';
COMMENT ON COLUMN quic_turnover_host.ticket_key_changes IS 'Times the key identifier of newly issued tickets changed.';
COMMENT ON COLUMN quic_turnover_host.ticket_key_period_s IS 'Median time between ticket key changes, s (NULL with fewer than two changes).';
COMMENT ON COLUMN quic_turnover_host.ticket_accept_max_age_s IS 'Largest age at which a presented ticket resumed the session, s.';
COMMENT ON COLUMN quic_turnover_host.ticket_reject_min_age_s IS 'Smallest age at which a presented ticket was refused (full handshake), s; NULL if none was.';
COMMENT ON COLUMN quic_turnover_host.zero_rtt_accept_max_age_s IS 'Largest ticket age at which 0-RTT data was accepted, s; NULL if never.';
COMMENT ON COLUMN quic_turnover_host.zero_rtt_reject_min_age_s IS 'Smallest ticket age at which 0-RTT data sent was refused, s; NULL if never.';

-- Views -----------------------------------------------------------------------------

CREATE VIEW quic_support_host AS
SELECT run_id, min(rank) AS rank, hostname,
       bool_or(vn_answer = 'version-negotiation'
               AND (1 = ANY(vn_versions) OR 1798521807 = ANY(vn_versions))) AS quic,
       bool_or(vn_answer = 'version-negotiation') AS version_negotiation,
       bool_or(coalesce(alt_svc_h3, false)) AS alt_svc_h3,
       bool_or(coalesce('h3' = ANY(https_rr_alpn), false)) AS https_rr_h3,
       bool_or(vn_answer = 'garbage') AS garbage_reply,
       bool_or(family(address) = 4 AND vn_answer = 'version-negotiation') AS quic_ipv4,
       bool_or(family(address) = 6 AND vn_answer = 'version-negotiation') AS quic_ipv6
FROM quic_discovery GROUP BY run_id, hostname;
COMMENT ON VIEW quic_support_host IS 'Per hostname of a quic-discover run: QUIC support (a Version Negotiation listing v1 or v2 on some address, as the thesis counted valid REJ replies), and the Alt-Svc / HTTPS-record hints.';

CREATE VIEW quic_support_by_cut AS
WITH cuts AS (
    SELECT s.run_id, c.cut FROM (SELECT run_id, max(rank) AS max_rank FROM quic_support_host GROUP BY run_id) s,
         LATERAL (SELECT (10::bigint ^ g)::bigint AS cut FROM generate_series(1, 7) g) c
    WHERE c.cut < s.max_rank * 10
)
SELECT c.run_id, c.cut, count(h.*) AS hosts,
       count(*) FILTER (WHERE h.quic) AS quic_hosts,
       avg(coalesce(h.quic, false)::int)::float8 AS quic_share,
       avg(coalesce(h.alt_svc_h3, false)::int)::float8 AS alt_svc_h3_share,
       avg(coalesce(h.https_rr_h3, false)::int)::float8 AS https_rr_h3_share
FROM cuts c JOIN quic_support_host h ON h.run_id = c.run_id AND h.rank <= c.cut
GROUP BY c.run_id, c.cut;
COMMENT ON VIEW quic_support_by_cut IS 'Table 6.2 analogue: share of hostnames with QUIC support within the top-10, -100, ... of the list (shares in 0..1; hostnames that did not resolve count as without QUIC).';

CREATE VIEW quic_handshake_host AS
SELECT c.run_id, c.hostname, c.address, c.purpose, c.status, c.version, c.alpn, c.retry, c.handshake_ms,
       c.session_resumed, c.early_data_sent, c.early_data_accepted, c.n_tokens, c.n_tickets,
       (SELECT max(t.token_len) FROM quic_token t WHERE t.run_id = c.run_id AND t.conn_id = c.conn_id) AS token_len,
       (SELECT max(k.lifetime_s) FROM quic_ticket k WHERE k.run_id = c.run_id AND k.conn_id = c.conn_id) AS ticket_lifetime_s,
       (SELECT max(k.max_early_data) FROM quic_ticket k WHERE k.run_id = c.run_id AND k.conn_id = c.conn_id) AS ticket_max_early_data,
       c.cert_sha256, c.close_code, c.close_reason
FROM quic_connection c;
COMMENT ON VIEW quic_handshake_host IS 'Per connection: handshake outcome and the state the server handed out (token length, ticket lifetime s, max_early_data bytes).';

CREATE VIEW quic_tracking_summary AS
SELECT run_id, hostname, address,
       tokens_issued,
       CASE WHEN NOT tokens_issued THEN 'no tokens'
            WHEN token_accept_max_age_s IS NULL THEN 'unobservable (no Retry)'
            WHEN token_reject_min_age_s IS NULL THEN 'accepted up to >= ' || round(token_accept_max_age_s::numeric, 1) || ' s'
            ELSE 'accepted up to ' || round(token_accept_max_age_s::numeric, 1) || '..' || round(token_reject_min_age_s::numeric, 1) || ' s' END AS token_linkability,
       token_key_period_s,
       tickets_issued,
       ticket_lifetime_s,
       ticket_accept_max_age_s, ticket_reject_min_age_s,
       coalesce(ticket_reject_min_age_s, ticket_accept_max_age_s) AS ticket_tracking_bound_s,
       ticket_key_period_s,
       zero_rtt_accept_max_age_s,
       ticket_key_prefix_len > 0 AS ticket_key_visible_to_observers,
       observed_s
FROM quic_turnover_host;
COMMENT ON VIEW quic_tracking_summary IS 'Per host address: which identifiers persist and for how long (s): tokens link visits for the server only; tickets are sent in clear (PSK identity), so their persistence lets also on-path observers link visits; key periods bound how long ticket/token keys are shared.';

CREATE VIEW quic_lifetimes AS
SELECT run_id, hostname, address, 'token' AS kind, token_accept_max_age_s AS accept_max_age_s,
       token_reject_min_age_s AS reject_min_age_s, token_key_period_s AS key_period_s FROM quic_turnover_host WHERE tokens_issued
UNION ALL
SELECT run_id, hostname, address, 'ticket', ticket_accept_max_age_s, ticket_reject_min_age_s, ticket_key_period_s
FROM quic_turnover_host WHERE tickets_issued;
COMMENT ON VIEW quic_lifetimes IS 'Long form for the lifetime / turnover CDFs: per host address and kind (token, ticket): acceptance ages and key period, s.';
