-- 0006_atlas: RIPE Atlas resolver round-trip-time campaign (issue 8; thesis ch. 2.4.1
-- and 9.4.2). One scan_run (kind 'atlas') per campaign, one (kind 'atlas-authoritative')
-- per run of the instrumented authoritative server. Times are milliseconds (ms) unless a
-- column says otherwise; timestamps are timestamptz (UTC).

-- Probes selected for a campaign, as the API described them at selection time.
CREATE TABLE atlas_probe (
    run_id       bigint  NOT NULL REFERENCES scan_run(id) ON DELETE CASCADE,
    prb_id       integer NOT NULL,
    country_code text,
    asn_v4       bigint,
    asn_v6       bigint,
    address_v4   inet,
    address_v6   inet,
    status       text,
    PRIMARY KEY (run_id, prb_id)
);
COMMENT ON TABLE atlas_probe IS 'RIPE Atlas probes selected for a campaign run (API metadata at selection time).';
COMMENT ON COLUMN atlas_probe.run_id IS 'The campaign (scan_run.id, kind atlas).';
COMMENT ON COLUMN atlas_probe.prb_id IS 'RIPE Atlas probe id.';
COMMENT ON COLUMN atlas_probe.country_code IS 'ISO 3166 country code the probe reports.';
COMMENT ON COLUMN atlas_probe.asn_v4 IS 'Origin ASN of the probe''s IPv4 address according to RIPE Atlas (the campaign uses the offline IP-to-ASN map, atlas_asn, for classification).';
COMMENT ON COLUMN atlas_probe.asn_v6 IS 'Origin ASN of the probe''s IPv6 address according to RIPE Atlas.';
COMMENT ON COLUMN atlas_probe.address_v4 IS 'Public IPv4 address of the probe (NULL if none).';
COMMENT ON COLUMN atlas_probe.address_v6 IS 'Public IPv6 address of the probe (NULL if none).';
COMMENT ON COLUMN atlas_probe.status IS 'Probe status name (Connected, Disconnected, ...).';

-- Every measurement the campaign created (or tried to create).
CREATE TABLE atlas_measurement (
    run_id      bigint  NOT NULL REFERENCES scan_run(id) ON DELETE CASCADE,
    msm_id      bigint  NOT NULL,
    role        text    NOT NULL CHECK (role IN ('dns-probe-resolver', 'ping-local-resolver',
                                                 'ping-egress-resolver', 'ping-server')),
    af          smallint NOT NULL CHECK (af IN (4, 6)),
    target      text,
    prb_ids     integer[] NOT NULL,
    definition  jsonb   NOT NULL,
    status      text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    fetched_at  timestamptz,
    PRIMARY KEY (run_id, msm_id)
);
COMMENT ON TABLE atlas_measurement IS 'One-off RIPE Atlas measurements created by a campaign run.';
COMMENT ON COLUMN atlas_measurement.run_id IS 'The campaign (scan_run.id).';
COMMENT ON COLUMN atlas_measurement.msm_id IS 'RIPE Atlas measurement id.';
COMMENT ON COLUMN atlas_measurement.role IS 'What it measures: dns-probe-resolver (DNS via each probe''s own resolvers), ping-local-resolver / ping-egress-resolver (probe to a resolver address), ping-server (probe to the test server, RTT_direct).';
COMMENT ON COLUMN atlas_measurement.af IS 'Address family (4 or 6).';
COMMENT ON COLUMN atlas_measurement.target IS 'Ping target address or DNS query argument.';
COMMENT ON COLUMN atlas_measurement.prb_ids IS 'Probes the measurement was requested from.';
COMMENT ON COLUMN atlas_measurement.definition IS 'The definition as sent to the API (POST body).';
COMMENT ON COLUMN atlas_measurement.status IS 'Last status name seen (Stopped, No suitable probes, ...).';
COMMENT ON COLUMN atlas_measurement.created_at IS 'When the campaign created it.';
COMMENT ON COLUMN atlas_measurement.fetched_at IS 'When its results were last fetched.';

-- Raw results, exactly as the API returned them (re-fetching adds nothing twice).
CREATE TABLE atlas_result_raw (
    run_id     bigint  NOT NULL REFERENCES scan_run(id) ON DELETE CASCADE,
    msm_id     bigint  NOT NULL,
    prb_id     integer NOT NULL,
    ts         bigint  NOT NULL,
    result     jsonb   NOT NULL,
    fetched_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, msm_id, prb_id, ts)
);
COMMENT ON TABLE atlas_result_raw IS 'RIPE Atlas results in the API''s JSON format, one row per result object.';
COMMENT ON COLUMN atlas_result_raw.run_id IS 'The campaign (scan_run.id).';
COMMENT ON COLUMN atlas_result_raw.msm_id IS 'Measurement id.';
COMMENT ON COLUMN atlas_result_raw.prb_id IS 'Probe id.';
COMMENT ON COLUMN atlas_result_raw.ts IS 'Result timestamp (UNIX seconds).';
COMMENT ON COLUMN atlas_result_raw.result IS 'The result object as served by the API.';
COMMENT ON COLUMN atlas_result_raw.fetched_at IS 'When it was first fetched.';

-- One row per DNS response (or failure) of a probe's local resolver.
CREATE TABLE atlas_dns_response (
    run_id        bigint  NOT NULL REFERENCES scan_run(id) ON DELETE CASCADE,
    msm_id        bigint  NOT NULL,
    prb_id        integer NOT NULL,
    ts            bigint  NOT NULL,
    subid         integer NOT NULL,
    af            smallint,
    resolver_addr inet,
    src_addr      inet,
    qname         text,
    rt_ms         float8,
    egress_addr   inet,
    error         text,
    PRIMARY KEY (run_id, msm_id, prb_id, ts, subid)
);
COMMENT ON TABLE atlas_dns_response IS 'DNS query of a probe through one of its configured resolvers: the response time and the resolver''s egress address (whoami answer); failures (timeouts, no resolver) kept with error set.';
COMMENT ON COLUMN atlas_dns_response.run_id IS 'The campaign (scan_run.id).';
COMMENT ON COLUMN atlas_dns_response.msm_id IS 'Measurement id.';
COMMENT ON COLUMN atlas_dns_response.prb_id IS 'Probe id.';
COMMENT ON COLUMN atlas_dns_response.ts IS 'Result timestamp (UNIX seconds).';
COMMENT ON COLUMN atlas_dns_response.subid IS 'Position of the resolver in the probe''s resolver list (1 = first; 0 = no per-resolver result).';
COMMENT ON COLUMN atlas_dns_response.af IS 'Address family of the query.';
COMMENT ON COLUMN atlas_dns_response.resolver_addr IS 'The locally configured resolver (dst_addr), often private.';
COMMENT ON COLUMN atlas_dns_response.src_addr IS 'The probe''s local source address.';
COMMENT ON COLUMN atlas_dns_response.qname IS 'The unique name queried (<prb_id>.<timestamp>.<zone>).';
COMMENT ON COLUMN atlas_dns_response.rt_ms IS 'DNS response time measured by the probe (ms); NULL on failure.';
COMMENT ON COLUMN atlas_dns_response.egress_addr IS 'Address the resolver used towards the authoritative server (the A/AAAA/TXT whoami answer).';
COMMENT ON COLUMN atlas_dns_response.error IS 'NULL on success, else timeout, no-resolver, no-answer, malformed or the probe''s error text.';

-- Resolver addresses of each probe (local and egress) and whether they were pinged.
CREATE TABLE atlas_resolver (
    run_id        bigint  NOT NULL REFERENCES scan_run(id) ON DELETE CASCADE,
    prb_id        integer NOT NULL,
    address       inet    NOT NULL,
    kind          text    NOT NULL CHECK (kind IN ('local', 'egress')),
    local_addr    inet,
    subid         integer NOT NULL,
    is_private    boolean NOT NULL,
    ping_skipped  text,
    PRIMARY KEY (run_id, prb_id, address, kind)
);
COMMENT ON TABLE atlas_resolver IS 'Resolver addresses of a probe: each local resolver and the egress address observed for it; ping_skipped records why an address was not pinged.';
COMMENT ON COLUMN atlas_resolver.run_id IS 'The campaign (scan_run.id).';
COMMENT ON COLUMN atlas_resolver.prb_id IS 'Probe id.';
COMMENT ON COLUMN atlas_resolver.address IS 'The resolver address.';
COMMENT ON COLUMN atlas_resolver.kind IS 'local (configured on the probe, dst_addr) or egress (seen by the authoritative server / whoami answer).';
COMMENT ON COLUMN atlas_resolver.local_addr IS 'For egress rows: the local resolver it was observed through.';
COMMENT ON COLUMN atlas_resolver.subid IS 'Position of the (local) resolver in the probe''s list.';
COMMENT ON COLUMN atlas_resolver.is_private IS 'Address is private / CGNAT / link-local / ULA (not pingable from the Internet).';
COMMENT ON COLUMN atlas_resolver.ping_skipped IS 'NULL if pinged, else why not (private-address).';

-- One row per ping result of a probe (5 packets; RTT = average, as the thesis).
CREATE TABLE atlas_ping (
    run_id   bigint  NOT NULL REFERENCES scan_run(id) ON DELETE CASCADE,
    msm_id   bigint  NOT NULL,
    prb_id   integer NOT NULL,
    ts       bigint  NOT NULL,
    role     text    NOT NULL,
    af       smallint,
    dst_addr inet,
    dst_name text,
    sent     integer,
    rcvd     integer,
    avg_ms   float8,
    min_ms   float8,
    max_ms   float8,
    rtts_ms  float8[],
    error    text,
    PRIMARY KEY (run_id, msm_id, prb_id, ts)
);
COMMENT ON TABLE atlas_ping IS 'Ping from a probe to a resolver address or the test server; lost packets and failures kept.';
COMMENT ON COLUMN atlas_ping.run_id IS 'The campaign (scan_run.id).';
COMMENT ON COLUMN atlas_ping.msm_id IS 'Measurement id.';
COMMENT ON COLUMN atlas_ping.prb_id IS 'Probe id.';
COMMENT ON COLUMN atlas_ping.ts IS 'Result timestamp (UNIX seconds).';
COMMENT ON COLUMN atlas_ping.role IS 'ping-local-resolver, ping-egress-resolver or ping-server (RTT_direct).';
COMMENT ON COLUMN atlas_ping.af IS 'Address family.';
COMMENT ON COLUMN atlas_ping.dst_addr IS 'Pinged address.';
COMMENT ON COLUMN atlas_ping.dst_name IS 'Target as given in the definition.';
COMMENT ON COLUMN atlas_ping.sent IS 'Echo requests sent.';
COMMENT ON COLUMN atlas_ping.rcvd IS 'Echo replies received.';
COMMENT ON COLUMN atlas_ping.avg_ms IS 'Average RTT of the received replies (ms); NULL if none (RIPE reports -1).';
COMMENT ON COLUMN atlas_ping.min_ms IS 'Minimum RTT (ms); NULL if no reply.';
COMMENT ON COLUMN atlas_ping.max_ms IS 'Maximum RTT (ms); NULL if no reply.';
COMMENT ON COLUMN atlas_ping.rtts_ms IS 'Per-packet RTTs (ms), NULL elements = lost packets (x: "*").';
COMMENT ON COLUMN atlas_ping.error IS 'NULL if at least one reply arrived; else no-reply or the probe''s error (dnserr, ...).';

-- Pings from the test server to each egress resolver address (RTT_Server).
CREATE TABLE atlas_server_ping (
    run_id   bigint  NOT NULL REFERENCES scan_run(id) ON DELETE CASCADE,
    address  inet    NOT NULL,
    status   text    NOT NULL,
    sent     integer,
    rcvd     integer,
    avg_ms   float8,
    min_ms   float8,
    max_ms   float8,
    rtts_ms  float8[],
    error    text,
    measured_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, address)
);
COMMENT ON TABLE atlas_server_ping IS 'ICMP echo from the test server to an egress resolver address (RTT_Server); one row per address.';
COMMENT ON COLUMN atlas_server_ping.run_id IS 'The campaign (scan_run.id).';
COMMENT ON COLUMN atlas_server_ping.address IS 'Pinged resolver (egress) address.';
COMMENT ON COLUMN atlas_server_ping.status IS 'Scanner status: success, connection-timeout (no reply), blocked (policy), unknown-error.';
COMMENT ON COLUMN atlas_server_ping.sent IS 'Echo requests sent.';
COMMENT ON COLUMN atlas_server_ping.rcvd IS 'Echo replies received.';
COMMENT ON COLUMN atlas_server_ping.avg_ms IS 'Average RTT of the replies (ms); NULL if none.';
COMMENT ON COLUMN atlas_server_ping.min_ms IS 'Minimum RTT (ms).';
COMMENT ON COLUMN atlas_server_ping.max_ms IS 'Maximum RTT (ms).';
COMMENT ON COLUMN atlas_server_ping.rtts_ms IS 'Per-reply RTTs (ms).';
COMMENT ON COLUMN atlas_server_ping.error IS 'Why there is no RTT (no-reply, blocked by policy, ...).';
COMMENT ON COLUMN atlas_server_ping.measured_at IS 'When the row was stored.';

-- Origin AS of every address of a campaign (offline IP-to-ASN file, pyasn).
CREATE TABLE atlas_asn (
    run_id  bigint NOT NULL REFERENCES scan_run(id) ON DELETE CASCADE,
    address inet   NOT NULL,
    asn     bigint,
    prefix  cidr,
    PRIMARY KEY (run_id, address)
);
COMMENT ON TABLE atlas_asn IS 'Origin ASN of probe, resolver and server addresses from the user-provided IP-to-ASN file (pyasn); NULL asn = not announced in the file.';
COMMENT ON COLUMN atlas_asn.run_id IS 'The campaign (scan_run.id).';
COMMENT ON COLUMN atlas_asn.address IS 'The mapped address.';
COMMENT ON COLUMN atlas_asn.asn IS 'Origin AS number (longest matching prefix); NULL if none.';
COMMENT ON COLUMN atlas_asn.prefix IS 'The matching prefix.';

-- Queries the instrumented authoritative server received.
CREATE TABLE atlas_auth_query (
    run_id      bigint   NOT NULL REFERENCES scan_run(id) ON DELETE CASCADE,
    received_at timestamptz NOT NULL,
    zone        text     NOT NULL,
    qname       text     NOT NULL,
    qtype       text     NOT NULL,
    proto       text     NOT NULL CHECK (proto IN ('udp', 'tcp')),
    src_addr    inet     NOT NULL,
    src_port    integer  NOT NULL,
    ecs_addr    inet,
    ecs_source_prefix smallint,
    rcode       text     NOT NULL
);
COMMENT ON TABLE atlas_auth_query IS 'Every query the instrumented authoritative server (netsurvey atlas authoritative) received: the source address of a query for a unique label is the egress address of the resolver that sent it.';
COMMENT ON COLUMN atlas_auth_query.run_id IS 'The server run (scan_run.id, kind atlas-authoritative).';
COMMENT ON COLUMN atlas_auth_query.received_at IS 'Arrival time.';
COMMENT ON COLUMN atlas_auth_query.zone IS 'Zone the server answers for.';
COMMENT ON COLUMN atlas_auth_query.qname IS 'Query name, lower case, no trailing dot.';
COMMENT ON COLUMN atlas_auth_query.qtype IS 'Query type (A, AAAA, TXT, ...).';
COMMENT ON COLUMN atlas_auth_query.proto IS 'udp or tcp.';
COMMENT ON COLUMN atlas_auth_query.src_addr IS 'Source address of the query (the resolver''s egress address).';
COMMENT ON COLUMN atlas_auth_query.src_port IS 'Source port.';
COMMENT ON COLUMN atlas_auth_query.ecs_addr IS 'EDNS Client Subnet address, if the query carried one.';
COMMENT ON COLUMN atlas_auth_query.ecs_source_prefix IS 'EDNS Client Subnet source prefix length (bits).';
COMMENT ON COLUMN atlas_auth_query.rcode IS 'Response code sent (NOERROR, NXDOMAIN, REFUSED).';
CREATE INDEX atlas_auth_query_qname ON atlas_auth_query (qname);

-- Analysis views --------------------------------------------------------------------

-- Fig 2.4: RTT from each probe to each observed (egress) resolver address, average of
-- the replies of one 5-packet ping, with the AS classification (same AS = ISP resolver).
CREATE VIEW atlas_resolver_rtt AS
SELECT p.run_id, p.prb_id, p.dst_addr AS resolver_addr, p.avg_ms AS rtt_ms, p.sent, p.rcvd,
       pa.asn AS probe_asn, ra.asn AS resolver_asn,
       CASE WHEN pa.asn IS NULL OR ra.asn IS NULL THEN NULL ELSE pa.asn = ra.asn END AS same_as
FROM atlas_ping p
JOIN atlas_probe pr ON pr.run_id = p.run_id AND pr.prb_id = p.prb_id
LEFT JOIN atlas_asn pa ON pa.run_id = p.run_id
     AND pa.address = CASE WHEN p.af = 6 THEN pr.address_v6 ELSE pr.address_v4 END
LEFT JOIN atlas_asn ra ON ra.run_id = p.run_id AND ra.address = p.dst_addr
WHERE p.role = 'ping-egress-resolver' AND p.avg_ms IS NOT NULL;
COMMENT ON VIEW atlas_resolver_rtt IS 'Fig 2.4: per (probe, egress resolver) the average RTT (ms) of a 5-packet ping from the probe, with probe/resolver origin ASNs and same_as (NULL if either ASN is unknown).';

-- Fig 9.6: per probe with an ISP (same-AS) resolver: RTT_DNS (probe -> resolver),
-- RTT_Server (test server -> resolver) and RTT_direct (probe -> test server). The
-- resolver is the probe's first (lowest subid) same-AS egress resolver with all three.
CREATE VIEW atlas_rtt_triplet AS
SELECT DISTINCT ON (r.run_id, r.prb_id)
       r.run_id, r.prb_id, r.resolver_addr, r.rtt_ms AS rtt_dns_ms, s.avg_ms AS rtt_server_ms,
       d.avg_ms AS rtt_direct_ms
FROM atlas_resolver_rtt r
JOIN atlas_resolver er ON er.run_id = r.run_id AND er.prb_id = r.prb_id
     AND er.address = r.resolver_addr AND er.kind = 'egress'
JOIN atlas_server_ping s ON s.run_id = r.run_id AND s.address = r.resolver_addr
     AND s.avg_ms IS NOT NULL
JOIN LATERAL (SELECT avg(x.avg_ms) AS avg_ms FROM atlas_ping x
              WHERE x.run_id = r.run_id AND x.prb_id = r.prb_id AND x.role = 'ping-server'
                AND x.avg_ms IS NOT NULL) d ON d.avg_ms IS NOT NULL
WHERE r.same_as
ORDER BY r.run_id, r.prb_id, er.subid, r.resolver_addr;
COMMENT ON VIEW atlas_rtt_triplet IS 'Fig 9.6: per probe with a same-AS (ISP) resolver: rtt_dns_ms (probe to resolver), rtt_server_ms (test server to resolver), rtt_direct_ms (probe to test server; mean over address families if several), all averages of 5 pings (ms).';

-- Every failure of a campaign, from every stage, so nothing is silently dropped.
CREATE VIEW atlas_failure AS
SELECT run_id, prb_id, 'dns' AS stage, host(resolver_addr) AS address, error AS reason
  FROM atlas_dns_response WHERE error IS NOT NULL
UNION ALL
SELECT run_id, prb_id, role, coalesce(host(dst_addr), dst_name), error
  FROM atlas_ping WHERE error IS NOT NULL
UNION ALL
SELECT run_id, prb_id, 'ping-' || kind || '-resolver', host(address), ping_skipped
  FROM atlas_resolver WHERE ping_skipped IS NOT NULL
UNION ALL
SELECT run_id, NULL, 'server-ping', host(address), coalesce(error, status)
  FROM atlas_server_ping WHERE avg_ms IS NULL;
COMMENT ON VIEW atlas_failure IS 'All failures of a campaign: DNS timeouts/errors, pings without reply, private resolver addresses not pinged, server pings without reply (stage, address, reason).';
