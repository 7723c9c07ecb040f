-- 0125_browser_lifetime_clock: how the browser's clock was moved for a lifetime probe (issue 27).
-- Probes before this migration used libfaketime 0.9.10 (Chromium with a faked monotonic clock,
-- Firefox could not run); from here on clockshift.c (browser_probes/clockshift.c), which moves
-- only the wall clock (and, for WebKit, the monotonic clocks by the same offset). Results of
-- different clock movers are not pooled (analysis/browser.py).

ALTER TABLE browser_lifetime_probe ADD COLUMN clock_mover text;
ALTER TABLE browser_lifetime_probe ADD COLUMN monotonic_shifted boolean;
ALTER TABLE browser_lifetime ADD COLUMN clock_mover text;
COMMENT ON COLUMN browser_lifetime_probe.clock_mover IS 'How the browser clock was moved: clockshift (browser_probes/clockshift.c, LD_PRELOAD, wall clock from a mapped offset file); NULL = libfaketime (probes before migration 0125).';
COMMENT ON COLUMN browser_lifetime_probe.monotonic_shifted IS 'The browser''s monotonic clocks jumped by the same offset as its wall clock (WebKit: glib-networking ages its session cache by the monotonic clock); false = only the wall clock moved; NULL = not recorded (before migration 0125).';
COMMENT ON COLUMN browser_lifetime.clock_mover IS 'How the browser clock was moved in this result''s probes: clockshift, or NULL = libfaketime (before migration 0125).';
COMMENT ON TABLE browser_lifetime_probe IS 'One lifetime probe: a fresh browser visits server_name, its connections are closed, its clock (clock_mover, browser processes only) is moved forward by clock_offset_s, and it visits again; did the second visit present the first visit''s state (server-side evidence)?';
COMMENT ON COLUMN browser_lifetime_probe.server_limit_s IS 'Seconds: the lifetime the server announces / enforces for this state (TLS 1.3: the NewSessionTicket lifetime, at most 604800 s by RFC 8446 sec. 4.6.1, whatever the session timeout; TLS 1.2: the session timeout = ticket hint; QUIC: ticket lifetime / token max age).';
