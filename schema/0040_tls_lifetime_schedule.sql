-- scan tls-lifetime as a scheduler of future attempts (issue 26): the search state of every
-- (host, mechanism, version) is an append-only log, so a restarted run (--resume RUN)
-- knows what was measured, what was pending and what is finished. A planned attempt's
-- session is stored with it (DER, scanners/tls/sessions.py), so a restarted run presents
-- it at its age; the bytes are cleared when the run finishes.
CREATE TABLE tls_lifetime_event (
    run_id         bigint      NOT NULL REFERENCES scan_run(id) ON DELETE CASCADE,
    origin_host    text        NOT NULL,
    origin_address inet        NOT NULL,
    mechanism      text        NOT NULL CHECK (mechanism IN ('id', 'ticket')),
    version        text        NOT NULL,
    round          integer     NOT NULL,
    grid_index     integer,
    event          text        NOT NULL CHECK (event IN ('planned', 'resumed', 'refused', 'failed', 'dropped',
                                                         'lost', 'finished')),
    due_at         timestamptz,
    at             timestamptz NOT NULL,
    detail         text,
    session        bytea
);
COMMENT ON TABLE tls_lifetime_event IS 'Search log of scan tls-lifetime (bounded-memory scheduler): one row per planned attempt, per outcome and per finished (host, mechanism, version). Pending attempts = planned rows without a later resumed/refused/failed/dropped/lost row for the same (run, host, address, mechanism, version, round, grid_index).';
COMMENT ON COLUMN tls_lifetime_event.run_id IS 'scan_run (kind tls-lifetime).';
COMMENT ON COLUMN tls_lifetime_event.origin_host IS 'SNI of the host whose lifetime is searched.';
COMMENT ON COLUMN tls_lifetime_event.origin_address IS 'Address the sessions are established with and presented to.';
COMMENT ON COLUMN tls_lifetime_event.mechanism IS 'id (TLS 1.2 session ID, client tickets disabled) or ticket.';
COMMENT ON COLUMN tls_lifetime_event.version IS 'TLS version (1.2 / 1.3).';
COMMENT ON COLUMN tls_lifetime_event.round IS 'Search round (1 = first set of sessions; each later round establishes fresh sessions for the ages still undecided).';
COMMENT ON COLUMN tls_lifetime_event.grid_index IS 'Age tried, in steps: age = grid_index x step seconds (scan_run.parameters step). NULL for a finished row.';
COMMENT ON COLUMN tls_lifetime_event.event IS 'planned: a session was established and will be presented at due_at; resumed / refused / failed: the attempt''s outcome (refused = a successful handshake that did not resume; failed = the handshake itself failed); dropped: a planned attempt given up because earlier outcomes already decided its age; lost: a planned attempt without a stored session whose process died (logged on --resume); finished: the search of this (host, mechanism, version) ended (detail says why).';
COMMENT ON COLUMN tls_lifetime_event.due_at IS 'planned: when the session is to be presented (completion of its initial handshake + age). NULL otherwise.';
COMMENT ON COLUMN tls_lifetime_event.at IS 'When the event happened (logged).';
COMMENT ON COLUMN tls_lifetime_event.detail IS 'finished: bracketed | resumed-at-max-age | refused-at-first-step | not-offered | initial-failed | no-progress; failed: the handshake error; resumed / refused: decided-as:J when the attempt was more than half a step late, so its outcome was counted for grid index J = floor (resumed) or ceil (refused) of its real age / step instead of grid_index; else NULL.';
COMMENT ON COLUMN tls_lifetime_event.session IS 'planned: the session to present (OpenSSL i2d_SSL_SESSION DER, includes its master secret), so --resume can present it after a restart; NULL when libssl was not reachable (the attempt is then logged lost on resume) and for every row once the run finished (cleared).';
CREATE INDEX tls_lifetime_event_run ON tls_lifetime_event (run_id, origin_host, mechanism, version);
