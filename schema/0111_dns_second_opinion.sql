-- 0111_dns_second_opinion (issue 24, the DNS zoo): what an independent DNS client, Knot's
-- kdig (+norec, +subnet), read from an authoritative server's reply - a second opinion on
-- scan dns-ttl (TTLs, minimal responses, RCODEs) and scan dns-ecs (ECS echo and scope).
CREATE TABLE dns_second_opinion (
    run_id          bigint   NOT NULL REFERENCES scan_run (id) ON DELETE CASCADE,
    hostname        text     NOT NULL,
    qtype           text     NOT NULL CHECK (qtype IN ('A', 'AAAA')),
    nameserver      inet     NOT NULL,
    subnet          cidr,
    client          text     NOT NULL,
    status          text     NOT NULL CHECK (status IN ('success', 'timeout', 'error')),
    error           text,
    rcode           text,
    authoritative   boolean,
    ttl             integer  CHECK (ttl >= 0),
    answers         text[]   NOT NULL DEFAULT '{}',
    authority_count smallint CHECK (authority_count >= 0),
    ecs_address     inet,
    source_prefix   smallint,
    scope_prefix    smallint,
    observed_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ON dns_second_opinion (run_id);
COMMENT ON TABLE dns_second_opinion IS 'scan dns-second-opinion: one question (hostname, type, with or without an ECS option) asked by kdig at an authoritative server, and what kdig read from the reply (issue 24).';
COMMENT ON COLUMN dns_second_opinion.run_id IS 'scan_run.id of the run (kind dns-second-opinion).';
COMMENT ON COLUMN dns_second_opinion.hostname IS 'Name asked, lower case, no trailing dot.';
COMMENT ON COLUMN dns_second_opinion.qtype IS 'Record type asked: A or AAAA.';
COMMENT ON COLUMN dns_second_opinion.nameserver IS 'Address of the server asked (RD=0).';
COMMENT ON COLUMN dns_second_opinion.subnet IS 'Client subnet kdig sent (+subnet; its length is the source prefix length sent); NULL = the question without an ECS option.';
COMMENT ON COLUMN dns_second_opinion.client IS 'The independent client and its version, e.g. kdig 3.2.6.';
COMMENT ON COLUMN dns_second_opinion.status IS 'success (kdig printed a reply header), timeout (no reply) or error.';
COMMENT ON COLUMN dns_second_opinion.error IS 'kdig''s warning or error line when there is no reply; NULL on success.';
COMMENT ON COLUMN dns_second_opinion.rcode IS 'RCODE kdig printed (NOERROR, NXDOMAIN, REFUSED, ...); NULL without reply.';
COMMENT ON COLUMN dns_second_opinion.authoritative IS 'The aa flag among the flags kdig printed.';
COMMENT ON COLUMN dns_second_opinion.ttl IS 'Seconds: smallest TTL of the answer records of qtype owned by hostname; NULL without such records.';
COMMENT ON COLUMN dns_second_opinion.answers IS 'Values of those answer records, sorted.';
COMMENT ON COLUMN dns_second_opinion.authority_count IS 'AUTHORITY count kdig printed (records in the authority section).';
COMMENT ON COLUMN dns_second_opinion.ecs_address IS 'Address of the CLIENT-SUBNET option kdig printed from the reply; NULL = no ECS option in the reply.';
COMMENT ON COLUMN dns_second_opinion.source_prefix IS 'Bits: source prefix length of the reply''s ECS option as kdig printed it; NULL = no ECS option.';
COMMENT ON COLUMN dns_second_opinion.scope_prefix IS 'Bits: scope prefix length of the reply''s ECS option as kdig printed it (0 = global); NULL = no ECS option.';
COMMENT ON COLUMN dns_second_opinion.observed_at IS 'When the row was written (UTC).';
