-- scan quic-turnover as a scheduler of future connections (issues 24 and 26, scanners/quic/schedule.py):
-- each age of the lifetime search is tried with a ticket (token) never presented before, from
-- an establish connection of its own; the first state seen accepted is presented once more
-- (reuse: single-use or not); the search state is an append-only log so a restarted run
-- (--resume RUN) goes on where the killed one stopped.
ALTER TABLE quic_connection DROP CONSTRAINT quic_connection_purpose_check;
ALTER TABLE quic_connection ADD CONSTRAINT quic_connection_purpose_check
    CHECK (purpose IN ('fresh', 'resume', 'represent', 'establish', 'reuse'));
COMMENT ON COLUMN quic_connection.purpose IS 'fresh: no state presented (quic-turnover: a sample of the key series, one per round); resume: token and ticket of the fresh connection presented at once (scan quic); establish: quic-turnover, a connection whose ticket (token) will be presented once at one age of the lifetime search; represent: that ticket (token) presented at its age (quic-turnover; rows before migration 0163: the oldest token/ticket held, presented again every round); reuse: the first ticket (token) a search saw accepted, presented a second time at once (single-use or not).';
COMMENT ON COLUMN quic_connection.round IS 'quic-turnover: sample round (0-based) for fresh connections, search round (1-based, quic_turnover_event.round) for establish / represent / reuse connections; NULL for scan quic.';

ALTER TABLE quic_turnover_host ADD COLUMN token_reuse_accepted boolean;
ALTER TABLE quic_turnover_host ADD COLUMN ticket_reuse_accepted boolean;
ALTER TABLE quic_turnover_host ADD COLUMN token_presentations integer;
ALTER TABLE quic_turnover_host ADD COLUMN ticket_presentations integer;
COMMENT ON COLUMN quic_turnover_host.token_reuse_accepted IS 'The first token accepted, presented a second time at once, was accepted again (true: not single-use), refused (false: single-use); NULL if not tested (no token accepted, or token acceptance unobservable) or in rows before migration 0163.';
COMMENT ON COLUMN quic_turnover_host.ticket_reuse_accepted IS 'The first ticket that resumed, presented a second time at once, resumed again (true) or not (false: single-use tickets, e.g. quinn); NULL if not tested or in rows before migration 0163.';
COMMENT ON COLUMN quic_turnover_host.token_presentations IS 'Tokens presented for the lifetime search (represent connections that completed), each a token never presented before; NULL in rows before migration 0163.';
COMMENT ON COLUMN quic_turnover_host.ticket_presentations IS 'Tickets presented for the lifetime search (represent connections that completed), each a ticket never presented before; NULL in rows before migration 0163.';
COMMENT ON COLUMN quic_turnover_host.rounds IS 'Sample rounds run (fresh connections every every_s).';
COMMENT ON COLUMN quic_turnover_host.token_accept_max_age_s IS 'Largest age at which a token, never presented before, was accepted (no Retry), s; NULL if unobservable (the server never forces Retry).';
COMMENT ON COLUMN quic_turnover_host.ticket_accept_max_age_s IS 'Largest age at which a ticket, never presented before, resumed the session, s.';

CREATE TABLE quic_turnover_event (
    run_id      bigint      NOT NULL REFERENCES scan_run(id) ON DELETE CASCADE,
    hostname    text,
    address     inet        NOT NULL,
    port        integer     NOT NULL,
    kind        text        NOT NULL CHECK (kind IN ('sample', 'ticket', 'token')),
    round       integer,
    grid_index  integer,
    event       text        NOT NULL CHECK (event IN ('started', 'sampled', 'planned', 'accepted', 'refused', 'failed',
                                                      'dropped', 'lost', 'finished', 'reuse')),
    due_at      timestamptz,
    at          timestamptz NOT NULL,
    detail      text,
    conn_id     integer,
    state       bytea,
    shard_id    bigint
);
CREATE INDEX quic_turnover_event_run ON quic_turnover_event (run_id, address, kind);
COMMENT ON TABLE quic_turnover_event IS 'Schedule log of scan quic-turnover (scanners/quic/schedule.py): the sample series and the lifetime search of every (target, kind). Pending attempts = planned rows without a later row of another event for the same (run, hostname, address, port, kind, round, grid_index).';
COMMENT ON COLUMN quic_turnover_event.run_id IS 'scan_run (kind quic-turnover).';
COMMENT ON COLUMN quic_turnover_event.hostname IS 'SNI of the target (NULL for a bare address).';
COMMENT ON COLUMN quic_turnover_event.address IS 'Target address.';
COMMENT ON COLUMN quic_turnover_event.port IS 'Target UDP port.';
COMMENT ON COLUMN quic_turnover_event.kind IS 'sample: the key series (fresh connections every every_s); ticket / token: the lifetime search of that kind of state.';
COMMENT ON COLUMN quic_turnover_event.round IS 'sample: the sample round (0-based; NULL for started); ticket / token: the search round (1 = first set of establish connections; each later round tries the ages still undecided with fresh state).';
COMMENT ON COLUMN quic_turnover_event.grid_index IS 'Age tried, in steps: age = grid_index x every_s seconds (scan_run.parameters every_s). NULL for started, sampled, finished and reuse rows.';
COMMENT ON COLUMN quic_turnover_event.event IS 'started: the target''s sample series began (at = its round 0); sampled: a sample round''s fresh connection was made; planned: an establish connection obtained state to present at due_at; accepted / refused / failed: that presentation''s outcome (token accepted = no Retry, ticket accepted = session resumed; failed = no handshake); dropped: a planned presentation given up because other outcomes decided its age; lost: a planned presentation whose due time passed while no process ran (logged on --resume; never presented again, its age is re-tried with fresh state); finished: the search ended (detail says why); reuse: the first accepted state presented a second time (detail accepted / refused / failed).';
COMMENT ON COLUMN quic_turnover_event.due_at IS 'planned: when the state is to be presented (its arrival + grid_index x every_s). NULL otherwise.';
COMMENT ON COLUMN quic_turnover_event.at IS 'When the event happened (logged).';
COMMENT ON COLUMN quic_turnover_event.detail IS 'finished: bracketed | accepted-at-max-age | refused-at-first-step | not-offered | no-retry (token acceptance unobservable) | no-progress; failed: the handshake error; accepted / refused: decided-as:J when the presentation came more than half a step late, so it decided grid index J = floor (accepted) or ceil (refused) of its real age / every_s instead of grid_index; reuse: accepted | refused | failed.';
COMMENT ON COLUMN quic_turnover_event.conn_id IS 'quic_connection.conn_id of the establish connection (planned) or of the sample (sampled).';
COMMENT ON COLUMN quic_turnover_event.state IS 'planned: the state to present (ticket: aioquic SessionTicket as JSON, including its resumption secret; token: the token bytes), so --resume can present it at its age; NULL for every row once the run finished (cleared).';
COMMENT ON COLUMN quic_turnover_event.shard_id IS 'job_shard.id of the shard that wrote the row (sharded runs; see schema/0115_row_vantage.sql); NULL otherwise.';
