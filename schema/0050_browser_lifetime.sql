-- 0050_browser_lifetime: the browser's own lifetime of resumption state (issue 27,
-- browser_probes/lifetime.py): every clock-shifted probe (browser_lifetime_probe) and the
-- bisection result per browser and state (browser_lifetime). Sy 2019 Tables 4.2 / 6.1
-- "lifetime" columns, measured with libfaketime on the browser process against servers that
-- never expire the state during the experiment.

CREATE TABLE browser_lifetime_probe (
    run_id            bigint      NOT NULL REFERENCES scan_run(id) ON DELETE CASCADE,
    probe_no          integer     NOT NULL,
    browser           text        NOT NULL,
    browser_version   text,
    state             text        NOT NULL CHECK (state IN ('tls12-session-id', 'tls12-ticket', 'tls13-psk',
                                                            'quic-token', 'quic-psk')),
    server_name       text        NOT NULL,
    server_limit_s    float8,
    clock_offset_s    float8      NOT NULL,
    age_s             float8,
    presented         boolean,
    accepted          boolean,
    detail            text,
    evidence          jsonb,
    probed_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, probe_no)
);
COMMENT ON TABLE browser_lifetime_probe IS 'One lifetime probe: a fresh browser visits server_name, its connections are closed, its clock (libfaketime, browser process only) is moved forward by clock_offset_s, and it visits again; did the second visit present the first visit''s state (server-side evidence)?';
COMMENT ON COLUMN browser_lifetime_probe.run_id IS 'scan_run (kind browser-lifetime).';
COMMENT ON COLUMN browser_lifetime_probe.probe_no IS 'Order of the probe within the run (0, 1, ...).';
COMMENT ON COLUMN browser_lifetime_probe.browser IS 'chromium, firefox or webkit.';
COMMENT ON COLUMN browser_lifetime_probe.browser_version IS 'Browser version as WebDriver reports it.';
COMMENT ON COLUMN browser_lifetime_probe.state IS 'Kind of state: tls12-session-id, tls12-ticket, tls13-psk, quic-token (NEW_TOKEN), quic-psk (QUIC session ticket).';
COMMENT ON COLUMN browser_lifetime_probe.server_name IS 'Testbed host probed (life*.track.test never expire state during a run; hint.track.test has a 4 s limit).';
COMMENT ON COLUMN browser_lifetime_probe.server_limit_s IS 'Seconds: the server''s own lifetime for this state (session timeout / ticket lifetime / token max age).';
COMMENT ON COLUMN browser_lifetime_probe.clock_offset_s IS 'Seconds the browser clock was moved forward between the two visits.';
COMMENT ON COLUMN browser_lifetime_probe.age_s IS 'Seconds of browser-clock time between the first visit''s handshake and the second visit''s first connection (offset + real time between them); NULL if either was not seen.';
COMMENT ON COLUMN browser_lifetime_probe.presented IS 'The second visit presented the first visit''s state (TLS 1.2 ID/ticket byte-equal to what the server issued; TLS 1.3 PSK offered before any full handshake; QUIC token/ticket the server issued); NULL = inconclusive or n/a (see detail).';
COMMENT ON COLUMN browser_lifetime_probe.accepted IS 'The server resumed with (accepted) the presented state.';
COMMENT ON COLUMN browser_lifetime_probe.detail IS 'Human-readable account of the server-side evidence, or why the probe is n/a.';
COMMENT ON COLUMN browser_lifetime_probe.evidence IS 'Server-side records of both visits (observer ClientHello/ServerHello fields or QUIC server log events, identifiers truncated): {"first": [...], "second": [...]}.';
COMMENT ON COLUMN browser_lifetime_probe.probed_at IS 'When the probe row was written (real time).';

CREATE TABLE browser_lifetime (
    run_id                  bigint  NOT NULL REFERENCES scan_run(id) ON DELETE CASCADE,
    browser                 text    NOT NULL,
    browser_version         text,
    os                      text,
    state                   text    NOT NULL,
    server_name             text    NOT NULL,
    server_limit_s          float8,
    max_age_s               float8  NOT NULL,
    longest_presented_age_s float8,
    shortest_absent_age_s   float8,
    status                  text    NOT NULL CHECK (status IN ('measured', 'at-least-max', 'never-presented', 'n/a')),
    probes                  integer NOT NULL,
    detail                  text,
    PRIMARY KEY (run_id, browser, state)
);
COMMENT ON TABLE browser_lifetime IS 'Bisection result per browser and state: the browser''s own lifetime lies between longest_presented_age_s and shortest_absent_age_s (resolution 1 % or 60 s).';
COMMENT ON COLUMN browser_lifetime.run_id IS 'scan_run (kind browser-lifetime).';
COMMENT ON COLUMN browser_lifetime.browser IS 'chromium, firefox or webkit.';
COMMENT ON COLUMN browser_lifetime.browser_version IS 'Browser version as WebDriver reports it.';
COMMENT ON COLUMN browser_lifetime.os IS 'Operating system of the vantage (platform string).';
COMMENT ON COLUMN browser_lifetime.state IS 'tls12-session-id, tls12-ticket, tls13-psk, quic-token or quic-psk.';
COMMENT ON COLUMN browser_lifetime.server_name IS 'Testbed host probed.';
COMMENT ON COLUMN browser_lifetime.server_limit_s IS 'Seconds: the server''s own lifetime for this state (an upper bound the browser should honour when it is told).';
COMMENT ON COLUMN browser_lifetime.max_age_s IS 'Seconds: the largest age tried (30 days by default).';
COMMENT ON COLUMN browser_lifetime.longest_presented_age_s IS 'Seconds: longest age at which the state was still presented (NULL = never presented).';
COMMENT ON COLUMN browser_lifetime.shortest_absent_age_s IS 'Seconds: shortest age at which it was no longer presented (NULL = presented at every age tried).';
COMMENT ON COLUMN browser_lifetime.status IS 'measured (bracketed), at-least-max (still presented at max_age_s), never-presented, or n/a (the engine lacks the mechanism, or probes were inconclusive: see detail).';
COMMENT ON COLUMN browser_lifetime.probes IS 'Number of probes (rows in browser_lifetime_probe) behind this result.';
COMMENT ON COLUMN browser_lifetime.detail IS 'Why n/a, or remarks.';
