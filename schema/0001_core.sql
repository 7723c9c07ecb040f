-- 0001_core: target lists and scan-run bookkeeping shared by every scanner.
-- Every later scanner adds its own tables in new numbered files and records each
-- run in scan_run. Timestamps are timestamptz (UTC).

-- One imported top list (Tranco, Alexa, the testbed's list, ...).
CREATE TABLE target_list (
    id           serial PRIMARY KEY,
    name         text        NOT NULL,             -- the --list NAME scanners select by
    source       text        NOT NULL,             -- file it was imported from
    list_date    date        NOT NULL,             -- date the list was published (--date)
    imported_at  timestamptz NOT NULL DEFAULT now(),
    n_targets    integer     NOT NULL DEFAULT 0,   -- rows in target after de-duplication
    n_bad_lines  integer     NOT NULL DEFAULT 0,   -- malformed lines skipped
    n_duplicates integer     NOT NULL DEFAULT 0,   -- repeated hostnames/ranks skipped
    UNIQUE (name, list_date)
);
COMMENT ON TABLE target_list IS 'One imported top list; (name, list_date) is unique.';

-- One hostname of a list at its rank (1 = most popular). Names are lower-case A-labels.
CREATE TABLE target (
    list_id  integer NOT NULL REFERENCES target_list(id) ON DELETE CASCADE,
    rank     integer NOT NULL CHECK (rank > 0),
    hostname text    NOT NULL,
    PRIMARY KEY (list_id, rank),
    UNIQUE (list_id, hostname)
);
COMMENT ON TABLE target IS 'Hostnames of a target_list at their rank; first occurrence wins on duplicates.';

-- One execution of a scanner / probe / campaign.
CREATE TABLE scan_run (
    id            bigserial   PRIMARY KEY,
    kind          text        NOT NULL,            -- e.g. tfo, tls, quic, dns-ttl
    parameters    jsonb       NOT NULL DEFAULT '{}',  -- the command's options
    vantage       jsonb       NOT NULL DEFAULT '{}',  -- host, addresses, namespace
    tool_versions jsonb       NOT NULL DEFAULT '{}',  -- netsurvey, python, libraries
    started_at    timestamptz NOT NULL DEFAULT now(),
    finished_at   timestamptz,
    status        text        NOT NULL DEFAULT 'running'
                  CHECK (status IN ('running', 'finished', 'failed', 'cancelled')),
    counts        jsonb       NOT NULL DEFAULT '{}'   -- e.g. {"targets": 100, "ok": 97}
);
COMMENT ON TABLE scan_run IS 'Bookkeeping of every scan; result tables reference scan_run.id.';
CREATE INDEX scan_run_kind_started ON scan_run (kind, started_at);
