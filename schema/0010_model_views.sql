-- 0010_model_views: the views the simulation models read (analysis/models/inputs.py,
-- analysis/README.md "View contract"), defined over the scanners' own tables and views, so
-- that `netsurvey simulate MODEL` without --input runs from the stored measurements.
-- Every view carries scan_run_id (the run whose rows it derives from). Definitions and
-- deviations: analysis/README.md, section "Models" / "Views from the scanners' tables".
-- model_dns_query is deliberately absent: no table holds a per-user DNS query log.

-- Thesis Fig 3.3 -> Table 3.6: revisit k = connection k + 1 of the load-balancing survey.
CREATE VIEW model_tfo_revisit_failure AS
SELECT run_id                 AS scan_run_id,
       (connection - 1)::int  AS revisit,
       failure_rate::float8   AS failure_rate,
       hostnames::bigint      AS hostnames
FROM tfo_lb_new_address;
COMMENT ON VIEW model_tfo_revisit_failure IS 'Model tfo-revisits (Table 3.6) from the TFO load-balancing survey (tfo_lb_new_address, Fig 3.3): per survey run and revisit k (= connection k+1, k >= 1) the share of hostnames always supporting TFO whose (k+1)-th connection went to an address not seen in connections 1..k, i.e. whose cached cookies were useless (failure_rate, 0..1); hostnames = the denominator.';

-- Domain trees of the page-load logger: one causal edge per hostname (its first request).
CREATE VIEW model_domain_tree_edge AS
SELECT DISTINCT e.run_id AS scan_run_id, r.hostname AS site,
       coalesce(e.parent_hostname, e.hostname) AS parent, e.hostname AS child
FROM browser_domain_edge e
JOIN browser_visit v ON v.id = e.visit_id AND v.status = 'complete'
JOIN browser_domain_edge r ON r.visit_id = e.visit_id AND r.depth = 0
WHERE e.parent_hostname IS NOT NULL OR e.depth = 0;
COMMENT ON VIEW model_domain_tree_edge IS 'Models tls-across-hostnames / shared-address-validation (thesis ch. 5.4.2 domain trees) from the page-load logger (browser_domain_edge of complete browser_visit rows): site = the visited page''s root hostname (depth 0), parent -> child = the hostname whose resource caused child''s first request. One row parent = child = site marks each site so single-hostname sites count. Edges of several visits of one site are merged (distinct).';

-- Hostnames of each site (every node of its domain tree), for restricting trust pairs.
CREATE VIEW model_site_hostname AS
SELECT DISTINCT scan_run_id, site, child AS hostname FROM model_domain_tree_edge;
COMMENT ON VIEW model_site_hostname IS 'Helper of model_trust_pair: every hostname of every site''s domain tree (scan_run_id = the page-load run).';

-- Trust pairs inside one site's domain tree (thesis 5.4.3): certificate SANs, measured resumption.
CREATE VIEW model_trust_pair AS
WITH san_cover AS (     -- a's certificate (any successful handshake of `scan tls`) is valid for b
    SELECT DISTINCT h.run_id, h.hostname AS a, b.hostname AS b, b.site
    FROM tls_handshake h
    CROSS JOIN LATERAL unnest(h.cert_sans) AS n(name)
    JOIN model_site_hostname a_s ON a_s.hostname = h.hostname
    JOIN model_site_hostname b ON b.site = a_s.site AND b.hostname <> h.hostname
    WHERE h.status = 'success' AND h.cert_sans IS NOT NULL
      AND (lower(n.name) = b.hostname
           OR (lower(n.name) LIKE '*.%' AND strpos(b.hostname, '.') > 1
               AND substr(b.hostname, strpos(b.hostname, '.')) = substr(lower(n.name), 2)))
), resumed AS (         -- a session established with origin_host was resumed at host
    SELECT DISTINCT r.run_id, r.origin_host AS a, r.host AS b, b.site
    FROM tls_resumption r
    JOIN model_site_hostname a_s ON a_s.hostname = r.origin_host
    JOIN model_site_hostname b ON b.site = a_s.site AND b.hostname = r.host
    WHERE r.resumed AND r.origin_host <> r.host
)
SELECT DISTINCT run_id AS scan_run_id, site, least(a, b) AS a, greatest(a, b) AS b, 'san'::text AS source
FROM san_cover
UNION
SELECT DISTINCT run_id, site, least(a, b), greatest(a, b), 'resumption'::text
FROM resumed;
COMMENT ON VIEW model_trust_pair IS 'Trust relations between two hostnames of the same site''s domain tree (thesis 5.4.3), unordered (a < b). source san: the leaf certificate one of them served in a successful handshake of `scan tls` (tls_handshake.cert_sans) is valid for the other (exact name or one-label wildcard, RFC 6125; one direction suffices, as tls_shared_group kind san); source resumption: a session established with one of them was resumed at the other (tls_resumption.resumed, from `scan tls-shared`). scan_run_id = the TLS run that observed the relation; site = the page whose domain tree (model_domain_tree_edge, any page-load run) holds both hostnames.';

-- QuicSocks (Fig 9.7): Atlas per-probe RTT triplets.
CREATE VIEW model_rtt_triplet AS
SELECT run_id AS scan_run_id, prb_id::text AS client,
       rtt_dns_ms::float8 AS rtt_dns_ms, rtt_server_ms::float8 AS rtt_server_ms,
       rtt_direct_ms::float8 AS rtt_direct_ms
FROM atlas_rtt_triplet;
COMMENT ON VIEW model_rtt_triplet IS 'Model quicsocks (Tables 9.1, 9.2, Fig 9.7) from the RIPE Atlas campaign (atlas_rtt_triplet): client = Atlas probe id; rtt_dns_ms = probe to its same-AS resolver, rtt_server_ms = test server to that resolver''s egress address, rtt_direct_ms = probe to the test server (ms, averages of 5 pings).';

-- BLAST page-load simulation (sec. V-B): the logger's complete visits.
CREATE VIEW model_page_visit AS
SELECT v.run_id AS scan_run_id, v.id AS visit_id, v.url AS page,
       v.page_load_time_ms / 1000.0 AS recorded_plt_s
FROM browser_visit v
WHERE v.status = 'complete'
  AND EXISTS (SELECT 1 FROM browser_resource r WHERE r.visit_id = v.id AND r.hostname IS NOT NULL);
COMMENT ON VIEW model_page_visit IS 'Model pageload: one row per complete visit of the page-load logger; page = URL requested, recorded_plt_s = the logger''s BLAST page load time (s: until 95% of resources received their last byte).';

CREATE VIEW model_page_resource AS
WITH r AS (
    SELECT x.run_id, x.visit_id, x.resource_no, x.parent_no, x.hostname, x.encoded_bytes, x.http_status,
           min(x.resource_no) OVER (PARTITION BY x.visit_id) AS root_no
    FROM browser_resource x JOIN model_page_visit v ON v.visit_id = x.visit_id
    WHERE x.hostname IS NOT NULL
)
SELECT r.run_id AS scan_run_id, r.visit_id, r.resource_no::text AS resource_id,
       CASE WHEN r.resource_no = r.root_no THEN NULL
            WHEN p.resource_no IS NULL THEN r.root_no::text
            ELSE r.parent_no::text END AS parent_id,
       r.hostname AS server,
       coalesce(r.encoded_bytes, 0)::bigint AS size_bytes,
       (coalesce(r.http_status BETWEEN 300 AND 399, false)
        OR EXISTS (SELECT 1 FROM browser_resource t
                   WHERE t.visit_id = r.visit_id AND t.redirected_from_no = r.resource_no)) AS redirect
FROM r
LEFT JOIN r p ON p.visit_id = r.visit_id AND p.resource_no = r.parent_no;
COMMENT ON VIEW model_page_resource IS 'Model pageload: resources (requests; each redirect hop its own) of the visits in model_page_visit. resource_id / parent_id = browser_resource.resource_no / parent_no as text; the root (first request) has no parent, and a parentless or orphaned request (e.g. the favicon, whose initiator is the browser) hangs from the root document. server = hostname, size_bytes = bytes received on the wire (encoded body + headers; 0 if never received), redirect = the hop answered with a 3xx redirect.';

CREATE VIEW model_page_server AS
SELECT r.scan_run_id, r.visit_id, r.server,
       bool_or(b.url LIKE 'https:%') AS tls,
       CASE WHEN bool_or(b.url LIKE 'https:%') THEN
           (SELECT CASE WHEN bool_or(h.negotiated = 'TLSv1.3') THEN '1.3'
                        WHEN bool_or(h.negotiated = 'TLSv1.2') THEN '1.2' END
            FROM tls_handshake h WHERE h.hostname = r.server AND h.status = 'success') END AS tls_version,
       bool_or(b.protocol IN ('h2', 'h3')) AS h2
FROM model_page_resource r
JOIN browser_resource b ON b.visit_id = r.visit_id AND b.resource_no::text = r.resource_id
GROUP BY r.scan_run_id, r.visit_id, r.server;
COMMENT ON VIEW model_page_server IS 'Model pageload: per visit and server hostname, tls = reached over https; tls_version = highest TLS version (1.3 or 1.2) any `scan tls` handshake with that hostname negotiated (the logger does not record the TLS version; NULL if the hostname was never scanned, and the model then assumes 1.3); h2 = some response came over a multiplexing protocol (h2, or h3 for QUIC, whose different handshake the model does not distinguish).';
