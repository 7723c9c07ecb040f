-- 0005_dns: DNS TTL survey (thesis 2.4.2, Fig 2.5) and ECS survey (thesis 2.4.3).
-- One row per probe (hostname x record type at an authoritative server; hostname x
-- client subnet at a resolver). Written by scanners/dns (netsurvey scan dns-ttl / dns-ecs).

CREATE TABLE dns_ttl_probe (
    run_id          bigint      NOT NULL REFERENCES scan_run(id) ON DELETE CASCADE,
    rank            integer,
    hostname        text        NOT NULL,
    qtype           text        NOT NULL CHECK (qtype IN ('A', 'AAAA')),
    outcome         text        NOT NULL CHECK (outcome IN ('answer', 'cname', 'nodata', 'nxdomain',
                                  'servfail', 'lame', 'refused', 'timeout', 'malformed', 'blocked',
                                  'no-nameserver', 'error')),
    rcode           text,
    authoritative   boolean,
    ttl             integer     CHECK (ttl >= 0),
    answers         text[]      NOT NULL DEFAULT '{}',
    cname           text,
    zone            text,
    nameserver      inet,
    transport       text        CHECK (transport IN ('udp', 'tcp')),
    truncated       boolean     NOT NULL DEFAULT false,
    attempts        smallint    NOT NULL DEFAULT 0,
    rtt_ms          real,
    error           text,
    observed_at     timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE dns_ttl_probe IS 'One A or AAAA query of a hostname asked directly (RD=0) at an authoritative nameserver found by walking delegations (scan dns-ttl).';
COMMENT ON COLUMN dns_ttl_probe.run_id IS 'scan_run that made the probe (kind dns-ttl).';
COMMENT ON COLUMN dns_ttl_probe.rank IS 'Rank of the hostname in the target list (NULL for ad-hoc names).';
COMMENT ON COLUMN dns_ttl_probe.hostname IS 'Name asked, lower case, no trailing dot.';
COMMENT ON COLUMN dns_ttl_probe.qtype IS 'Record type asked: A or AAAA.';
COMMENT ON COLUMN dns_ttl_probe.outcome IS 'answer (RRset of qtype), cname (only a CNAME leaving the reply), nodata, nxdomain, servfail, lame (server named for the zone answers without authority, refers again or REFUSED), refused, timeout (no reply after every retry), malformed (unparsable reply), blocked (etiquette policy), no-nameserver, error.';
COMMENT ON COLUMN dns_ttl_probe.rcode IS 'RCODE of the recorded reply as text (NOERROR, NXDOMAIN, ...); NULL without reply.';
COMMENT ON COLUMN dns_ttl_probe.authoritative IS 'AA flag of the recorded reply.';
COMMENT ON COLUMN dns_ttl_probe.ttl IS 'Seconds: TTL of the answer RRset (smallest record TTL), or of the CNAME for outcome cname; NULL otherwise.';
COMMENT ON COLUMN dns_ttl_probe.answers IS 'Addresses of the answer RRset, sorted.';
COMMENT ON COLUMN dns_ttl_probe.cname IS 'Target of the first CNAME in the answer, if any.';
COMMENT ON COLUMN dns_ttl_probe.zone IS 'Zone the nameserver was asked for (deepest delegation found; NULL with --nameserver).';
COMMENT ON COLUMN dns_ttl_probe.nameserver IS 'Address of the authoritative server asked (or that failed during the walk).';
COMMENT ON COLUMN dns_ttl_probe.transport IS 'Transport of the recorded reply: udp, or tcp after a truncated UDP reply.';
COMMENT ON COLUMN dns_ttl_probe.truncated IS 'A UDP reply had the TC bit, so the query was repeated over TCP.';
COMMENT ON COLUMN dns_ttl_probe.attempts IS 'Datagrams sent for the final query (retransmissions included) plus 1 for TCP.';
COMMENT ON COLUMN dns_ttl_probe.rtt_ms IS 'Milliseconds from the last send to the recorded reply.';
COMMENT ON COLUMN dns_ttl_probe.error IS 'Short reason for anything but an answer.';
COMMENT ON COLUMN dns_ttl_probe.observed_at IS 'When the row was written (UTC).';
CREATE INDEX dns_ttl_probe_run ON dns_ttl_probe (run_id, qtype);

CREATE TABLE dns_ecs_probe (
    run_id          bigint      NOT NULL REFERENCES scan_run(id) ON DELETE CASCADE,
    rank            integer,
    hostname        text        NOT NULL,
    qtype           text        NOT NULL CHECK (qtype IN ('A', 'AAAA')),
    resolver        inet        NOT NULL,
    subnet          cidr        NOT NULL,
    outcome         text        NOT NULL CHECK (outcome IN ('answer', 'nodata', 'nxdomain', 'servfail',
                                  'refused', 'timeout', 'malformed', 'error')),
    rcode           text,
    source_prefix   smallint,
    scope_prefix    smallint,
    ecs_address     inet,
    ttl             integer     CHECK (ttl >= 0),
    answers         text[]      NOT NULL DEFAULT '{}',
    transport       text        CHECK (transport IN ('udp', 'tcp')),
    attempts        smallint    NOT NULL DEFAULT 0,
    rtt_ms          real,
    error           text,
    observed_at     timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE dns_ecs_probe IS 'One query of a hostname at a recursive resolver carrying an EDNS Client Subnet option (RFC 7871) for one client subnet (scan dns-ecs).';
COMMENT ON COLUMN dns_ecs_probe.run_id IS 'scan_run that made the probe (kind dns-ecs).';
COMMENT ON COLUMN dns_ecs_probe.rank IS 'Rank of the hostname in the target list.';
COMMENT ON COLUMN dns_ecs_probe.hostname IS 'Name asked, lower case, no trailing dot.';
COMMENT ON COLUMN dns_ecs_probe.qtype IS 'Record type asked (A in the thesis).';
COMMENT ON COLUMN dns_ecs_probe.resolver IS 'Address of the resolver asked (RD=1).';
COMMENT ON COLUMN dns_ecs_probe.subnet IS 'Client subnet sent in the ECS option; its length is the source prefix length sent.';
COMMENT ON COLUMN dns_ecs_probe.outcome IS 'answer, nodata, nxdomain, servfail, refused, timeout, malformed or error.';
COMMENT ON COLUMN dns_ecs_probe.rcode IS 'RCODE of the reply as text; NULL without reply.';
COMMENT ON COLUMN dns_ecs_probe.source_prefix IS 'Bits: source prefix length echoed in the reply''s ECS option; NULL if the reply had no ECS option.';
COMMENT ON COLUMN dns_ecs_probe.scope_prefix IS 'Bits: scope prefix length of the reply''s ECS option: 0 = the answer is valid for every client (global scope); NULL = no ECS option in the reply.';
COMMENT ON COLUMN dns_ecs_probe.ecs_address IS 'Address field of the reply''s ECS option.';
COMMENT ON COLUMN dns_ecs_probe.ttl IS 'Seconds: TTL of the answer RRset (smallest record TTL) as the resolver returned it.';
COMMENT ON COLUMN dns_ecs_probe.answers IS 'Addresses of the answer, sorted.';
COMMENT ON COLUMN dns_ecs_probe.transport IS 'udp, or tcp after a truncated UDP reply.';
COMMENT ON COLUMN dns_ecs_probe.attempts IS 'Datagrams sent (retransmissions included) plus 1 for TCP.';
COMMENT ON COLUMN dns_ecs_probe.rtt_ms IS 'Milliseconds from the last send to the reply.';
COMMENT ON COLUMN dns_ecs_probe.error IS 'Short reason for anything but an answer.';
COMMENT ON COLUMN dns_ecs_probe.observed_at IS 'When the row was written (UTC).';
CREATE INDEX dns_ecs_probe_run ON dns_ecs_probe (run_id, subnet);

-- Fig 2.5: TTLs of the records retrieved (outcome answer), one row per record set.
CREATE VIEW dns_ttl_observation AS
    SELECT run_id, rank, hostname, qtype, ttl, nameserver
    FROM dns_ttl_probe WHERE outcome = 'answer';
COMMENT ON VIEW dns_ttl_observation IS 'Fig 2.5 input: TTL (seconds) of every A/AAAA RRset retrieved from an authoritative server.';

-- Thesis 2.4.2 shares per run and type: exactly 60 s / 300 s / 600 s, under 60 s, over 30 min.
CREATE VIEW dns_ttl_summary AS
    SELECT p.run_id, p.qtype,
           count(*) FILTER (WHERE outcome = 'answer')                             AS n_answers,
           count(*) FILTER (WHERE outcome <> 'answer')                            AS n_failed,
           avg((ttl = 60)::int)   FILTER (WHERE outcome = 'answer')               AS share_60s,
           avg((ttl = 300)::int)  FILTER (WHERE outcome = 'answer')               AS share_300s,
           avg((ttl = 600)::int)  FILTER (WHERE outcome = 'answer')               AS share_600s,
           avg((ttl < 60)::int)   FILTER (WHERE outcome = 'answer')               AS share_under_60s,
           avg((ttl > 1800)::int) FILTER (WHERE outcome = 'answer')               AS share_over_30min,
           percentile_disc(0.5) WITHIN GROUP (ORDER BY ttl) FILTER (WHERE outcome = 'answer') AS median_ttl
    FROM dns_ttl_probe p GROUP BY p.run_id, p.qtype;
COMMENT ON VIEW dns_ttl_summary IS 'Per run and type: answers, failures, shares (0..1) of TTLs equal to 60/300/600 s, under 60 s, over 1800 s, median TTL (s).';

CREATE VIEW dns_ttl_failure AS
    SELECT run_id, qtype, outcome, count(*) AS n
    FROM dns_ttl_probe WHERE outcome <> 'answer' GROUP BY run_id, qtype, outcome;
COMMENT ON VIEW dns_ttl_failure IS 'Probes without an answer per run, type and outcome (no such type, timeouts, lame, ...).';

-- Thesis 2.4.3: scope distribution per run and subnet over replies that carried ECS.
CREATE VIEW dns_ecs_scope_distribution AS
    SELECT run_id, subnet, scope_prefix, count(*) AS n,
           count(*)::float8 / sum(count(*)) OVER (PARTITION BY run_id, subnet) AS share
    FROM dns_ecs_probe WHERE outcome = 'answer' AND scope_prefix IS NOT NULL
    GROUP BY run_id, subnet, scope_prefix;
COMMENT ON VIEW dns_ecs_scope_distribution IS 'Per run and client subnet: answers with an ECS option by scope prefix length (bits), count and share (0..1).';

CREATE VIEW dns_ecs_summary AS
    SELECT run_id, subnet,
           count(*)                                                            AS n_probes,
           count(*) FILTER (WHERE outcome = 'answer')                          AS n_answers,
           count(*) FILTER (WHERE outcome = 'answer' AND scope_prefix IS NOT NULL) AS n_with_ecs,
           avg((scope_prefix = 0)::int) FILTER (WHERE outcome = 'answer' AND scope_prefix IS NOT NULL) AS share_global
    FROM dns_ecs_probe GROUP BY run_id, subnet;
COMMENT ON VIEW dns_ecs_summary IS 'Per run and client subnet: probes, answers, answers with an ECS option, share (0..1) of those with global scope (scope prefix 0).';
