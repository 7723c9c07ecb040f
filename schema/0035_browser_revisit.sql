-- 0035_browser_revisit: the time a browser saves on a revisit with state (issue 25, item 4;
-- browser_probes/revisit.py). Each row is one visit of the timing testbed's server behind
-- the delay line; its phases come from the page's Navigation Timing entry, whether the
-- server resumed (and took early data) from the server's own log.

CREATE TABLE browser_revisit_visit (
    run_id             bigint      NOT NULL REFERENCES scan_run(id) ON DELETE CASCADE,
    browser            text        NOT NULL,
    browser_version    text,
    transport          text        NOT NULL CHECK (transport IN ('tls12', 'tls13', 'quic')),
    repetition         integer     NOT NULL,
    visit              text        NOT NULL CHECK (visit IN ('first', 'revisit')),
    url                text        NOT NULL,
    next_hop_protocol  text,
    connect_ms         float8,
    tls_ms             float8,
    ttfb_ms            float8,
    response_end_ms    float8,
    server_protocol    text,
    server_resumed     boolean,
    server_early_data  boolean,
    error              text,
    link_profile       text,
    link_rtt_ms        float8,
    observed_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, browser, transport, repetition, visit)
);
COMMENT ON TABLE browser_revisit_visit IS 'One browser visit of the timing testbed (timing.test behind the delay line): a first visit with a fresh profile, then, connections closed, a revisit that may resume. Phases from the page''s Navigation Timing entry; resumption and early data from the server''s log.';
COMMENT ON COLUMN browser_revisit_visit.run_id IS 'scan_run (kind browser-revisit).';
COMMENT ON COLUMN browser_revisit_visit.browser IS 'chromium, firefox or webkit.';
COMMENT ON COLUMN browser_revisit_visit.browser_version IS 'Browser version as WebDriver reports it.';
COMMENT ON COLUMN browser_revisit_visit.transport IS 'tls12 (TLS 1.2-only server, port 8443), tls13 (TLS over TCP, port 443) or quic (HTTP/3 forced on, UDP 443).';
COMMENT ON COLUMN browser_revisit_visit.repetition IS 'Which first/revisit pair (0, 1, ...); each pair uses a fresh browser profile.';
COMMENT ON COLUMN browser_revisit_visit.visit IS 'first (no state) or revisit (the first visit''s state, connections closed in between).';
COMMENT ON COLUMN browser_revisit_visit.url IS 'URL visited; its query holds a nonce that matches the server''s log line and keeps the HTTP cache out.';
COMMENT ON COLUMN browser_revisit_visit.next_hop_protocol IS 'Navigation Timing nextHopProtocol (http/1.1, h2, h3).';
COMMENT ON COLUMN browser_revisit_visit.connect_ms IS 'Milliseconds: connectEnd - connectStart (TCP and TLS handshakes, or the QUIC handshake).';
COMMENT ON COLUMN browser_revisit_visit.tls_ms IS 'Milliseconds: connectEnd - secureConnectionStart (the TLS part); NULL when the browser did not report it.';
COMMENT ON COLUMN browser_revisit_visit.ttfb_ms IS 'Milliseconds from the navigation''s start to the first byte of the response (responseStart).';
COMMENT ON COLUMN browser_revisit_visit.response_end_ms IS 'Milliseconds from the navigation''s start to the end of the response (responseEnd).';
COMMENT ON COLUMN browser_revisit_visit.server_protocol IS 'What the server logged: TLSv1.2 / TLSv1.3 (nginx $ssl_protocol) or quic.';
COMMENT ON COLUMN browser_revisit_visit.server_resumed IS 'The server resumed the session (nginx $ssl_session_reused, the QUIC server''s session_resumed); NULL = no server record.';
COMMENT ON COLUMN browser_revisit_visit.server_early_data IS 'The request arrived as early data (nginx $ssl_early_data, the QUIC server''s early_data_accepted).';
COMMENT ON COLUMN browser_revisit_visit.error IS 'Why the visit has no timing or no server record (n/a: the engine lacks the transport); NULL when complete.';
COMMENT ON COLUMN browser_revisit_visit.link_profile IS 'Delay profile the timing testbed''s delay line applied during the run (config/testbed.toml [[profile]]).';
COMMENT ON COLUMN browser_revisit_visit.link_rtt_ms IS 'Milliseconds: the profile''s round-trip time (twice its one-way delay).';
COMMENT ON COLUMN browser_revisit_visit.observed_at IS 'When the row was written.';

CREATE VIEW browser_revisit_saving AS
SELECT f.run_id, f.browser, max(f.browser_version) AS browser_version, f.transport,
       max(f.link_profile) AS link_profile, max(f.link_rtt_ms) AS link_rtt_ms,
       count(*) AS pairs,
       count(*) FILTER (WHERE r.server_resumed) AS revisits_resumed,
       count(*) FILTER (WHERE r.server_early_data) AS revisits_early_data,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY f.ttfb_ms) AS first_ttfb_median_ms,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY r.ttfb_ms) AS revisit_ttfb_median_ms,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY f.ttfb_ms - r.ttfb_ms) AS saving_median_ms,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY f.ttfb_ms - r.ttfb_ms) / NULLIF(max(f.link_rtt_ms), 0)
           AS saving_median_rtts,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY f.connect_ms - r.connect_ms) AS connect_saving_median_ms
FROM browser_revisit_visit f
JOIN browser_revisit_visit r ON r.run_id = f.run_id AND r.browser = f.browser AND r.transport = f.transport
                            AND r.repetition = f.repetition AND r.visit = 'revisit'
WHERE f.visit = 'first' AND f.ttfb_ms IS NOT NULL AND r.ttfb_ms IS NOT NULL
GROUP BY f.run_id, f.browser, f.transport;
COMMENT ON VIEW browser_revisit_saving IS 'Per run, browser and transport: pairs of visits with timings, how many revisits the server resumed / took as early data, the medians of the first visit''s and the revisit''s time to first byte and of the per-pair saving (ms and in round trips of the link profile).';
COMMENT ON COLUMN browser_revisit_saving.pairs IS 'First/revisit pairs where both visits have timings (observations behind the medians).';
COMMENT ON COLUMN browser_revisit_saving.revisits_resumed IS 'Revisits the server logged as resumed.';
COMMENT ON COLUMN browser_revisit_saving.revisits_early_data IS 'Revisits whose request the server took as early data (0-RTT).';
COMMENT ON COLUMN browser_revisit_saving.first_ttfb_median_ms IS 'Milliseconds: median time to first byte of the first visits.';
COMMENT ON COLUMN browser_revisit_saving.revisit_ttfb_median_ms IS 'Milliseconds: median time to first byte of the revisits.';
COMMENT ON COLUMN browser_revisit_saving.saving_median_ms IS 'Milliseconds: median over pairs of first minus revisit time to first byte.';
COMMENT ON COLUMN browser_revisit_saving.saving_median_rtts IS 'saving_median_ms in round trips of the link profile (NULL without delay).';
COMMENT ON COLUMN browser_revisit_saving.run_id IS 'scan_run (kind browser-revisit).';
COMMENT ON COLUMN browser_revisit_saving.browser IS 'chromium, firefox or webkit.';
COMMENT ON COLUMN browser_revisit_saving.browser_version IS 'Browser version as WebDriver reports it.';
COMMENT ON COLUMN browser_revisit_saving.transport IS 'tls12, tls13 or quic (browser_revisit_visit.transport).';
COMMENT ON COLUMN browser_revisit_saving.link_profile IS 'Delay profile of the timing testbed during the run.';
COMMENT ON COLUMN browser_revisit_saving.link_rtt_ms IS 'Milliseconds: the profile''s round-trip time.';
COMMENT ON COLUMN browser_revisit_saving.connect_saving_median_ms IS 'Milliseconds: median over pairs of first minus revisit connection set-up (connect_ms); 0-RTT shows in time to first byte, not here.';
