-- 0007_browser: real-browser measurements (browser_probes/, issue 9).
--  * page-load logger (BLAST, Wang NDSS 2020, sec. II / appendix C): one row per visit,
--    one per resource (redirect hops are resources of their own), one per domain-tree edge;
--  * tracking-period probes (Sy 2019, Tables 3.2, 4.2, 6.1): one row per connection the
--    server-side observer saw, one verdict per (experiment, mechanism).
-- Times of resources are milliseconds relative to the visit's first request (the root's
-- "request created"); durations in the tracking tables are seconds.

CREATE TABLE browser_visit (
    id                 bigserial   PRIMARY KEY,
    run_id             bigint      NOT NULL REFERENCES scan_run(id) ON DELETE CASCADE,
    browser            text        NOT NULL,
    browser_version    text,
    worker             integer     NOT NULL,
    url                text        NOT NULL,
    final_url          text,
    started_at         timestamptz NOT NULL,
    duration_s         float8,
    status             text        NOT NULL CHECK (status IN ('complete', 'incomplete')),
    error              text,
    n_resources        integer     NOT NULL DEFAULT 0,
    page_load_time_ms  float8,
    tree_height        integer,
    longest_new_conn_path integer
);
COMMENT ON TABLE browser_visit IS 'One page visit by one browser (page-load logger). A visit whose browser hung (page-load timeout) or crashed is kept with status incomplete and the error; the browser is restarted.';
COMMENT ON COLUMN browser_visit.run_id IS 'The scan_run (kind browser-pageload) this visit belongs to.';
COMMENT ON COLUMN browser_visit.browser IS 'chromium or firefox.';
COMMENT ON COLUMN browser_visit.browser_version IS 'Browser version string reported by the WebDriver session.';
COMMENT ON COLUMN browser_visit.worker IS 'Index of the parallel browser (0..--browsers-1) that made the visit.';
COMMENT ON COLUMN browser_visit.url IS 'URL requested (https://HOSTNAME/ for list targets).';
COMMENT ON COLUMN browser_visit.final_url IS 'URL of the document after redirects (NULL if never reached).';
COMMENT ON COLUMN browser_visit.started_at IS 'Wall-clock time the navigation was started.';
COMMENT ON COLUMN browser_visit.duration_s IS 'Seconds from navigation start until logging finished (network idle or timeout).';
COMMENT ON COLUMN browser_visit.status IS 'complete: loaded and logged; incomplete: timeout, crash or load error (see error).';
COMMENT ON COLUMN browser_visit.error IS 'Why the visit is incomplete (NULL when complete).';
COMMENT ON COLUMN browser_visit.n_resources IS 'Resources logged (every redirect hop counts).';
COMMENT ON COLUMN browser_visit.page_load_time_ms IS 'BLAST page load time: ms from the root request until 95% of resources received their last byte.';
COMMENT ON COLUMN browser_visit.tree_height IS 'Resources on the longest root-to-leaf path of the resource tree (root alone = 1; BLAST: minimum number of round trips).';
COMMENT ON COLUMN browser_visit.longest_new_conn_path IS 'Largest number of resources on one root-to-leaf path that each opened a new connection (sequential connection set-ups).';
CREATE INDEX browser_visit_run ON browser_visit (run_id);

CREATE TABLE browser_resource (
    run_id            bigint  NOT NULL REFERENCES scan_run(id) ON DELETE CASCADE,
    visit_id          bigint  NOT NULL REFERENCES browser_visit(id) ON DELETE CASCADE,
    resource_no       integer NOT NULL,
    parent_no         integer,
    redirected_from_no integer,
    url               text    NOT NULL,
    hostname          text,
    resource_type     text,
    initiator_type    text,
    method            text,
    http_status       integer,
    protocol          text,
    connection_id     bigint,
    connection_reused boolean,
    from_cache        boolean,
    remote_address    inet,
    remote_port       integer,
    created_ms        float8,
    dispatched_ms     float8,
    first_byte_sent_ms float8,
    first_byte_received_ms float8,
    last_byte_received_ms float8,
    encoded_bytes     bigint,
    failed            text,
    PRIMARY KEY (visit_id, resource_no)
);
COMMENT ON TABLE browser_resource IS 'One resource (one request; each redirect hop is its own row) of a visit with its parent and the five BLAST events.';
COMMENT ON COLUMN browser_resource.run_id IS 'scan_run of the visit.';
COMMENT ON COLUMN browser_resource.visit_id IS 'browser_visit.id.';
COMMENT ON COLUMN browser_resource.resource_no IS 'Order in which the browser created the request (0 = root document).';
COMMENT ON COLUMN browser_resource.parent_no IS 'resource_no of the parent: the redirecting hop for a redirect target, else the document or script named by the initiator; NULL for the root.';
COMMENT ON COLUMN browser_resource.redirected_from_no IS 'resource_no of the hop that redirected to this one (NULL if not a redirect target).';
COMMENT ON COLUMN browser_resource.url IS 'Requested URL.';
COMMENT ON COLUMN browser_resource.hostname IS 'Host part of the URL (lower case).';
COMMENT ON COLUMN browser_resource.resource_type IS 'Browser resource type: Document, Script, Stylesheet, Image, Other, ...';
COMMENT ON COLUMN browser_resource.initiator_type IS 'DevTools initiator type: parser, script, other, redirect.';
COMMENT ON COLUMN browser_resource.method IS 'HTTP method.';
COMMENT ON COLUMN browser_resource.http_status IS 'HTTP status code of the response (3xx for redirect hops).';
COMMENT ON COLUMN browser_resource.protocol IS 'Application protocol: http/1.1, h2, h3.';
COMMENT ON COLUMN browser_resource.connection_id IS 'Browser connection id (same id = same connection within the visit).';
COMMENT ON COLUMN browser_resource.connection_reused IS 'True if the request went over an already open connection.';
COMMENT ON COLUMN browser_resource.from_cache IS 'Served from the browser cache (no network).';
COMMENT ON COLUMN browser_resource.remote_address IS 'Server IP address.';
COMMENT ON COLUMN browser_resource.remote_port IS 'Server port.';
COMMENT ON COLUMN browser_resource.created_ms IS 'BLAST event 1, request created: ms since the visit''s root request was created.';
COMMENT ON COLUMN browser_resource.dispatched_ms IS 'BLAST event 2, request dispatched (left the queue, connection set-up starts): ms since root creation.';
COMMENT ON COLUMN browser_resource.first_byte_sent_ms IS 'BLAST event 3, first byte of the request sent: ms since root creation.';
COMMENT ON COLUMN browser_resource.first_byte_received_ms IS 'BLAST event 4, first byte of the response received: ms since root creation.';
COMMENT ON COLUMN browser_resource.last_byte_received_ms IS 'BLAST event 5, last byte of the response received: ms since root creation (NULL if never).';
COMMENT ON COLUMN browser_resource.encoded_bytes IS 'Bytes received on the wire for this resource (encoded body + headers).';
COMMENT ON COLUMN browser_resource.failed IS 'Network error text if the request failed, else NULL.';

CREATE TABLE browser_domain_edge (
    run_id            bigint  NOT NULL REFERENCES scan_run(id) ON DELETE CASCADE,
    visit_id          bigint  NOT NULL REFERENCES browser_visit(id) ON DELETE CASCADE,
    parent_hostname   text,
    hostname          text    NOT NULL,
    first_resource_no integer NOT NULL,
    depth             integer NOT NULL,
    PRIMARY KEY (visit_id, hostname)
);
COMMENT ON TABLE browser_domain_edge IS 'Domain tree of a visit: each hostname once, with the hostname whose resource caused its first request (causal edge). Feeds the TLS shared-state scan and the simulations.';
COMMENT ON COLUMN browser_domain_edge.run_id IS 'scan_run of the visit.';
COMMENT ON COLUMN browser_domain_edge.visit_id IS 'browser_visit.id.';
COMMENT ON COLUMN browser_domain_edge.parent_hostname IS 'Hostname of the parent of the first resource from hostname (NULL for the root hostname; may equal nothing else in the tree).';
COMMENT ON COLUMN browser_domain_edge.hostname IS 'A hostname contacted during the visit.';
COMMENT ON COLUMN browser_domain_edge.first_resource_no IS 'resource_no of the first resource loaded from hostname.';
COMMENT ON COLUMN browser_domain_edge.depth IS 'Depth of hostname in the domain tree (root hostname = 0).';

CREATE TABLE browser_track_connection (
    run_id            bigint      NOT NULL REFERENCES scan_run(id) ON DELETE CASCADE,
    experiment        text        NOT NULL,
    step              text        NOT NULL,
    observed_at       timestamptz NOT NULL,
    transport         text        NOT NULL CHECK (transport IN ('tcp', 'quic')),
    server_name       text,
    server_address    inet        NOT NULL,
    client_port       integer     NOT NULL,
    tfo_cookie        bytea,
    tls_session_id    bytea,
    tls_ticket        bytea,
    tls13_psk_identities integer,
    tls13_psk_identity bytea,
    server_version    text,
    server_session_id bytea,
    server_accepted_psk boolean,
    issued_ticket     bytea,
    issued_ticket_lifetime_s bigint
);
COMMENT ON TABLE browser_track_connection IS 'One TCP/TLS connection of a browser as seen by the server-side observer (raw socket in the testbed web namespace): what the client presented and what the server answered.';
COMMENT ON COLUMN browser_track_connection.run_id IS 'scan_run (kind browser-track).';
COMMENT ON COLUMN browser_track_connection.experiment IS 'Experiment name (lifetime, hint, third-party, restart, private, vhost, cross-app).';
COMMENT ON COLUMN browser_track_connection.step IS 'Step of the experiment during which the connection was made (first, revisit, site-a, site-b, curl, ...).';
COMMENT ON COLUMN browser_track_connection.observed_at IS 'When the ClientHello was seen.';
COMMENT ON COLUMN browser_track_connection.transport IS 'tcp (TLS over TCP) or quic.';
COMMENT ON COLUMN browser_track_connection.server_name IS 'SNI of the ClientHello.';
COMMENT ON COLUMN browser_track_connection.server_address IS 'Server IP address.';
COMMENT ON COLUMN browser_track_connection.client_port IS 'Client TCP port (identifies the connection).';
COMMENT ON COLUMN browser_track_connection.tfo_cookie IS 'TFO cookie in the SYN (empty = cookie request, NULL = no TFO option).';
COMMENT ON COLUMN browser_track_connection.tls_session_id IS 'Legacy session ID in the ClientHello (NULL if empty). TLS 1.3 clients send a random 32-byte value: meaningful only for TLS 1.2 resumption.';
COMMENT ON COLUMN browser_track_connection.tls_ticket IS 'SessionTicket extension content (NULL if absent, empty if requesting a ticket).';
COMMENT ON COLUMN browser_track_connection.tls13_psk_identities IS 'Number of PSK identities in the pre_shared_key extension (NULL if absent).';
COMMENT ON COLUMN browser_track_connection.tls13_psk_identity IS 'First PSK identity (a TLS 1.3 ticket) presented.';
COMMENT ON COLUMN browser_track_connection.server_version IS 'Negotiated TLS version (1.2 or 1.3) from the ServerHello.';
COMMENT ON COLUMN browser_track_connection.server_session_id IS 'Session ID in the ServerHello (TLS 1.2: equal to the client''s = resumption by ID or ticket).';
COMMENT ON COLUMN browser_track_connection.server_accepted_psk IS 'TLS 1.3: ServerHello selected a PSK (resumption accepted).';
COMMENT ON COLUMN browser_track_connection.issued_ticket IS 'TLS 1.2 NewSessionTicket sent by the server (cleartext in TLS 1.2; TLS 1.3 tickets are encrypted and not visible).';
COMMENT ON COLUMN browser_track_connection.issued_ticket_lifetime_s IS 'ticket_lifetime_hint of that NewSessionTicket, seconds.';
CREATE INDEX browser_track_connection_run ON browser_track_connection (run_id, experiment);

CREATE TABLE browser_track_verdict (
    run_id          bigint  NOT NULL REFERENCES scan_run(id) ON DELETE CASCADE,
    browser         text    NOT NULL,
    browser_version text,
    os              text,
    experiment      text    NOT NULL,
    mechanism       text    NOT NULL,
    wait_s          float8,
    expected_max_s  float8,
    presented       boolean,
    accepted        boolean,
    verdict         text    NOT NULL,
    detail          text,
    PRIMARY KEY (run_id, experiment, mechanism, wait_s)
);
COMMENT ON TABLE browser_track_verdict IS 'Outcome of one tracking experiment for one mechanism: did the browser present, in the later context, the identifier of the first (presented), and did the server accept it (accepted).';
COMMENT ON COLUMN browser_track_verdict.run_id IS 'scan_run (kind browser-track).';
COMMENT ON COLUMN browser_track_verdict.browser IS 'chromium or firefox.';
COMMENT ON COLUMN browser_track_verdict.browser_version IS 'Browser version.';
COMMENT ON COLUMN browser_track_verdict.os IS 'Operating system of the vantage (platform string).';
COMMENT ON COLUMN browser_track_verdict.experiment IS 'lifetime, hint, third-party, restart, private, vhost, cross-app.';
COMMENT ON COLUMN browser_track_verdict.mechanism IS 'tls-session-id, tls-ticket (TLS 1.2), tls13-psk, quic-token, quic-psk, tfo-cookie.';
COMMENT ON COLUMN browser_track_verdict.wait_s IS 'Seconds between closing the first context and opening the second (-1 when not applicable).';
COMMENT ON COLUMN browser_track_verdict.expected_max_s IS 'Lifetime the server announced (ticket lifetime hint / session timeout), seconds.';
COMMENT ON COLUMN browser_track_verdict.presented IS 'The second context presented an identifier linkable to the first context (NULL = the mechanism was not offered).';
COMMENT ON COLUMN browser_track_verdict.accepted IS 'The server resumed with it.';
COMMENT ON COLUMN browser_track_verdict.verdict IS 'viable (tracking possible), blocked, or n/a (mechanism not used by this browser).';
COMMENT ON COLUMN browser_track_verdict.detail IS 'How the verdict was reached (counts of connections and identifiers).';

CREATE VIEW browser_pageload_summary AS
SELECT v.run_id, v.browser, v.url, v.status, v.n_resources, v.page_load_time_ms, v.tree_height,
       v.longest_new_conn_path,
       (SELECT count(*) FROM browser_domain_edge e WHERE e.visit_id = v.id) AS n_hostnames,
       (SELECT count(*) FROM browser_resource r WHERE r.visit_id = v.id AND r.connection_reused = false
          AND r.from_cache = false) AS n_new_connections
FROM browser_visit v;
COMMENT ON VIEW browser_pageload_summary IS 'Per visit: status, resources, page load time (ms), tree height, hostnames and new connections (analysis of the page-load logger).';

CREATE VIEW browser_tracking_table AS
SELECT run_id, browser, browser_version, os, experiment, mechanism,
       max(wait_s) FILTER (WHERE presented) AS longest_presented_wait_s,
       min(wait_s) FILTER (WHERE presented = false) AS shortest_absent_wait_s,
       max(expected_max_s) AS expected_max_s,
       CASE WHEN bool_or(verdict = 'viable') THEN 'viable'
            WHEN bool_and(verdict = 'n/a') THEN 'n/a' ELSE 'blocked' END AS verdict
FROM browser_track_verdict
GROUP BY run_id, browser, browser_version, os, experiment, mechanism;
COMMENT ON VIEW browser_tracking_table IS 'The thesis-style table per browser/version/OS: per experiment and mechanism the longest wait at which the identifier was still presented (s), the shortest at which it was not (s), and viable/blocked.';
