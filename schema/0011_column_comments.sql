-- 0011_column_comments: a comment on every column of the core tables and of every view
-- (docs/schema.md is generated from them by `netsurvey db docs`; `\d+` shows them).
-- Until now these were documented only in `--` comments of earlier migrations.
-- View columns that pass a table column through copy that column's comment.

COMMENT ON TABLE schema_migrations IS 'Applied schema migrations (schema/NNNN_*.sql), one row each; written by `netsurvey db migrate`.';
COMMENT ON COLUMN schema_migrations.version IS 'File name of the migration, e.g. 0001_core.sql.';
COMMENT ON COLUMN schema_migrations.applied_at IS 'When it was applied (UTC).';

COMMENT ON COLUMN target_list.id IS 'List id (target.list_id).';
COMMENT ON COLUMN target_list.name IS 'Name the list was imported under (--list NAME); scanners select the newest import of a name.';
COMMENT ON COLUMN target_list.source IS 'File the list was imported from.';
COMMENT ON COLUMN target_list.list_date IS 'Date the list was published (--date; default the import day).';
COMMENT ON COLUMN target_list.imported_at IS 'When it was imported (UTC).';
COMMENT ON COLUMN target_list.n_targets IS 'Hostnames imported (rows in target, after de-duplication).';
COMMENT ON COLUMN target_list.n_bad_lines IS 'Malformed lines skipped.';
COMMENT ON COLUMN target_list.n_duplicates IS 'Repeated hostnames or ranks skipped (the first occurrence wins).';

COMMENT ON COLUMN target.list_id IS 'target_list.id.';
COMMENT ON COLUMN target.rank IS 'Rank in the list, 1 = most popular.';
COMMENT ON COLUMN target.hostname IS 'Hostname, lower-case A-label (IDNA).';

COMMENT ON COLUMN scan_run.id IS 'Run id; every result row references it as run_id.';
COMMENT ON COLUMN scan_run.kind IS 'What ran: tfo, tfo-lb, tfo-reuse, tls, tls-lifetime, tls-shared, quic-discover, quic, quic-turnover, dns-ttl, dns-ecs, atlas, browser-*, ...';
COMMENT ON COLUMN scan_run.parameters IS 'The command''s options as JSON (list, top, port, rounds, ...).';
COMMENT ON COLUMN scan_run.vantage IS 'Where it ran: host, platform, network namespace (netns, nstb-vantage = the testbed), argv.';
COMMENT ON COLUMN scan_run.tool_versions IS 'Versions of netsurvey, Python and the libraries the scanner used.';
COMMENT ON COLUMN scan_run.started_at IS 'When the run started (UTC; for a sharded run when it was queued).';
COMMENT ON COLUMN scan_run.finished_at IS 'When it ended (UTC); NULL while queued or running.';
COMMENT ON COLUMN scan_run.status IS 'queued, running, finished, failed or cancelled.';
COMMENT ON COLUMN scan_run.counts IS 'Outcome counts as JSON, e.g. {"targets": 100, "success": 97}.';
COMMENT ON COLUMN scan_run.shards IS 'Number of shards of a sharded run (--shards/--procs); NULL = ran inline.';
COMMENT ON COLUMN scan_run.command IS 'argv of the sharded command (JSON array); NULL for inline runs.';

COMMENT ON COLUMN job_shard.run_id IS 'scan_run.id of the sharded run.';
COMMENT ON COLUMN job_shard.shard IS 'Shard number, 0 .. shards-1.';
COMMENT ON COLUMN job_shard.status IS 'finished or failed.';
COMMENT ON COLUMN job_shard.counts IS 'Outcome counts of this shard (JSON).';
COMMENT ON COLUMN job_shard.worker IS 'host:pid of the process that committed the shard.';
COMMENT ON COLUMN job_shard.attempt IS 'procrastinate attempt number (1 = first try).';
COMMENT ON COLUMN job_shard.finished_at IS 'When the shard committed (UTC).';

COMMENT ON COLUMN browser_visit.id IS 'Visit id (browser_resource.visit_id, browser_domain_edge.visit_id).';

-- computed view columns
COMMENT ON COLUMN tfo_support_by_cut.cut IS 'Top-list cut: ranks 1..cut (10, 100, ..., 1000000); a cut larger than the list holds the whole list.';
COMMENT ON COLUMN tfo_support_by_cut.hostnames IS 'Hostnames of the cut probed (one per rank; with several addresses the best one).';
COMMENT ON COLUMN tfo_support_by_cut.resolution_failed IS 'Hostnames whose name did not resolve.';
COMMENT ON COLUMN tfo_support_by_cut.responded IS 'Hostnames whose SYN got a SYN-ACK or RST.';
COMMENT ON COLUMN tfo_support_by_cut.silent IS 'Hostnames whose SYN got no reply.';
COMMENT ON COLUMN tfo_support_by_cut.tfo IS 'Hostnames whose SYN-ACK carried a TFO cookie.';
COMMENT ON COLUMN tfo_support_by_cut.tfo_share IS 'tfo / hostnames (0..1).';
COMMENT ON COLUMN tfo_lb_host.rounds_probed IS 'Rounds (connections) with a reply.';
COMMENT ON COLUMN tfo_lb_host.rounds_tfo IS 'Rounds whose SYN-ACK carried a TFO cookie.';
COMMENT ON COLUMN tfo_lb_host.addresses IS 'Distinct server addresses that answered over all rounds.';
COMMENT ON COLUMN tfo_lb_host.tfo_class IS 'always (a cookie in every round), sometimes or never.';
COMMENT ON COLUMN tfo_lb_new_address.connection IS 'Connection number k >= 2 of the survey (= round).';
COMMENT ON COLUMN tfo_lb_new_address.hostnames IS 'Always-TFO hostnames with a k-th connection.';
COMMENT ON COLUMN tfo_lb_new_address.new_address IS 'Of those, how many reached an address not seen in connections 1..k-1.';
COMMENT ON COLUMN tfo_lb_new_address.failure_rate IS 'new_address / hostnames (0..1): share whose cached cookie is useless.';
COMMENT ON COLUMN tfo_reuse_summary.probes IS 'SYNs with data and cookie sent.';
COMMENT ON COLUMN tfo_reuse_summary.accepted IS 'Probes whose SYN data was acknowledged (cookie accepted).';
COMMENT ON COLUMN tfo_reuse_summary.new_cookie_issued IS 'Probes not accepted whose SYN-ACK carried a fresh cookie.';
COMMENT ON COLUMN tfo_reuse_summary.no_syn_ack IS 'Probes answered by RST or not at all.';

COMMENT ON COLUMN tls_support_v.rank IS 'Smallest rank of the hostname in the run.';
COMMENT ON COLUMN tls_support_v.supports_id IS 'Some successful handshake got a non-empty session ID or resumed with it.';
COMMENT ON COLUMN tls_support_v.supports_ticket IS 'Some successful handshake got at least one session ticket.';
COMMENT ON COLUMN tls_support_v.id_resumed IS 'Some immediate session-ID resumption was accepted (NULL if never tried).';
COMMENT ON COLUMN tls_support_v.ticket_resumed IS 'Some immediate ticket resumption was accepted (NULL if never tried).';
COMMENT ON COLUMN tls_lifetime_hint_v.lifetime_s IS 'Seconds: largest ticket lifetime hint (TLS 1.2) / ticket_lifetime (TLS 1.3) the host announced in the run.';
COMMENT ON COLUMN tls_lifetime_measured_v.hostname IS 'Host the session was established with (tls_resumption.origin_host).';
COMMENT ON COLUMN tls_lifetime_measured_v.max_resumed_age_s IS 'Seconds: largest age at which the session was still resumed (NULL: never).';
COMMENT ON COLUMN tls_lifetime_measured_v.min_failed_age_s IS 'Seconds: smallest age at which a successful handshake did not resume (NULL: none).';
COMMENT ON COLUMN tls_lifetime_measured_v.attempts IS 'Resumption attempts counted (first of each chain, or all with --chain).';
COMMENT ON COLUMN tls_key_name_span_v.key_name IS 'STEK key_name (first 16 bytes of the ticket).';
COMMENT ON COLUMN tls_key_name_span_v.first_seen IS 'First handshake (any run) with a ticket of this key_name (UTC).';
COMMENT ON COLUMN tls_key_name_span_v.last_seen IS 'Last such handshake (UTC).';
COMMENT ON COLUMN tls_key_name_span_v.span_s IS 'Seconds from first_seen to last_seen: a lower bound of the STEK lifetime.';
COMMENT ON COLUMN tls_key_name_span_v.runs IS 'Runs in which the key_name was seen.';
COMMENT ON COLUMN tls_shared_group_size_v.size IS 'Hostnames in the group.';
COMMENT ON COLUMN tls_shared_group_size_v.members IS 'Hostnames of the group, sorted.';

COMMENT ON COLUMN quic_support_host.rank IS 'Smallest rank of the hostname in the run.';
COMMENT ON COLUMN quic_support_host.quic IS 'Some address answered with a Version Negotiation listing QUIC v1 or v2.';
COMMENT ON COLUMN quic_support_host.version_negotiation IS 'Some address answered with any Version Negotiation packet.';
COMMENT ON COLUMN quic_support_host.alt_svc_h3 IS 'An HTTP Alt-Svc header advertised h3.';
COMMENT ON COLUMN quic_support_host.https_rr_h3 IS 'The HTTPS resource record listed h3 in its alpn.';
COMMENT ON COLUMN quic_support_host.garbage_reply IS 'Some address answered with a UDP reply that is not QUIC.';
COMMENT ON COLUMN quic_support_host.quic_ipv4 IS 'Version Negotiation from an IPv4 address.';
COMMENT ON COLUMN quic_support_host.quic_ipv6 IS 'Version Negotiation from an IPv6 address.';
COMMENT ON COLUMN quic_support_by_cut.cut IS 'Top-list cut: ranks 1..cut (10, 100, ...; only cuts up to ten times the largest rank).';
COMMENT ON COLUMN quic_support_by_cut.hosts IS 'Hostnames of the cut.';
COMMENT ON COLUMN quic_support_by_cut.quic_hosts IS 'Hostnames of the cut with QUIC support.';
COMMENT ON COLUMN quic_support_by_cut.quic_share IS 'quic_hosts / hosts (0..1).';
COMMENT ON COLUMN quic_support_by_cut.alt_svc_h3_share IS 'Share (0..1) of hostnames advertising h3 in Alt-Svc.';
COMMENT ON COLUMN quic_support_by_cut.https_rr_h3_share IS 'Share (0..1) of hostnames listing h3 in an HTTPS record.';
COMMENT ON COLUMN quic_handshake_host.token_len IS 'Bytes: longest NEW_TOKEN token of the connection.';
COMMENT ON COLUMN quic_handshake_host.ticket_lifetime_s IS 'Seconds: longest session-ticket lifetime of the connection.';
COMMENT ON COLUMN quic_handshake_host.ticket_max_early_data IS 'Bytes: largest max_early_data of the connection''s tickets.';
COMMENT ON COLUMN quic_tracking_summary.token_linkability IS 'How long tokens link visits: no tokens, unobservable (no Retry), accepted up to >= X s, or X..Y s.';
COMMENT ON COLUMN quic_tracking_summary.ticket_tracking_bound_s IS 'Seconds: smallest refused ticket age, else largest accepted age (how long tickets link visits).';
COMMENT ON COLUMN quic_tracking_summary.ticket_key_visible_to_observers IS 'Tickets carry a key-identifier prefix visible on the wire (ticket_key_prefix_len > 0).';
COMMENT ON COLUMN quic_lifetimes.kind IS 'token or ticket.';
COMMENT ON COLUMN quic_lifetimes.accept_max_age_s IS 'Seconds: largest age at which it was accepted.';
COMMENT ON COLUMN quic_lifetimes.reject_min_age_s IS 'Seconds: smallest age at which it was refused (NULL: never).';
COMMENT ON COLUMN quic_lifetimes.key_period_s IS 'Seconds: median time between key changes (NULL: fewer than two changes).';

COMMENT ON COLUMN dns_ttl_summary.n_answers IS 'Probes answered with an RRset.';
COMMENT ON COLUMN dns_ttl_summary.n_failed IS 'Probes without an answer (nodata, nxdomain, timeout, lame, ...).';
COMMENT ON COLUMN dns_ttl_summary.share_60s IS 'Share (0..1) of answers with TTL = 60 s.';
COMMENT ON COLUMN dns_ttl_summary.share_300s IS 'Share (0..1) of answers with TTL = 300 s.';
COMMENT ON COLUMN dns_ttl_summary.share_600s IS 'Share (0..1) of answers with TTL = 600 s.';
COMMENT ON COLUMN dns_ttl_summary.share_under_60s IS 'Share (0..1) of answers with TTL < 60 s.';
COMMENT ON COLUMN dns_ttl_summary.share_over_30min IS 'Share (0..1) of answers with TTL > 1800 s.';
COMMENT ON COLUMN dns_ttl_summary.median_ttl IS 'Seconds: median TTL of the answers.';
COMMENT ON COLUMN dns_ttl_failure.n IS 'Probes with this outcome.';
COMMENT ON COLUMN dns_ecs_scope_distribution.n IS 'Answers with this scope prefix length.';
COMMENT ON COLUMN dns_ecs_scope_distribution.share IS 'n / answers with an ECS option for the subnet (0..1).';
COMMENT ON COLUMN dns_ecs_summary.n_probes IS 'Probes sent with this client subnet.';
COMMENT ON COLUMN dns_ecs_summary.n_answers IS 'Probes answered.';
COMMENT ON COLUMN dns_ecs_summary.n_with_ecs IS 'Answers with an ECS option.';
COMMENT ON COLUMN dns_ecs_summary.share_global IS 'Share (0..1) of answers with an ECS option whose scope prefix is 0 (valid for every client).';

COMMENT ON COLUMN atlas_failure.stage IS 'Where it failed: dns, the ping role (ping-egress-resolver, ping-server, ...), ping-<kind>-resolver (not pinged), server-ping.';
COMMENT ON COLUMN atlas_failure.address IS 'Address involved (resolver, destination or name).';
COMMENT ON COLUMN atlas_failure.reason IS 'Error text or reason the step was skipped.';
COMMENT ON COLUMN atlas_resolver_rtt.resolver_addr IS 'Egress resolver address pinged.';
COMMENT ON COLUMN atlas_resolver_rtt.rtt_ms IS 'Milliseconds: average RTT of the probe''s ping to the resolver.';
COMMENT ON COLUMN atlas_resolver_rtt.probe_asn IS 'Origin AS of the probe''s address (NULL: unknown).';
COMMENT ON COLUMN atlas_resolver_rtt.resolver_asn IS 'Origin AS of the resolver''s address (NULL: unknown).';
COMMENT ON COLUMN atlas_resolver_rtt.same_as IS 'probe_asn = resolver_asn (NULL if either is unknown).';
COMMENT ON COLUMN atlas_rtt_triplet.resolver_addr IS 'The probe''s same-AS egress resolver.';
COMMENT ON COLUMN atlas_rtt_triplet.rtt_dns_ms IS 'Milliseconds: probe to resolver (average RTT).';
COMMENT ON COLUMN atlas_rtt_triplet.rtt_server_ms IS 'Milliseconds: test server to resolver (average RTT).';
COMMENT ON COLUMN atlas_rtt_triplet.rtt_direct_ms IS 'Milliseconds: probe to test server (average RTT; mean over address families).';

COMMENT ON COLUMN browser_pageload_summary.n_hostnames IS 'Hostnames in the visit''s domain tree (browser_domain_edge rows).';
COMMENT ON COLUMN browser_pageload_summary.n_new_connections IS 'Resources fetched over a new connection (not reused, not from cache).';
COMMENT ON COLUMN browser_tracking_table.longest_presented_wait_s IS 'Seconds: longest wait after which the identifier was still presented.';
COMMENT ON COLUMN browser_tracking_table.shortest_absent_wait_s IS 'Seconds: shortest wait after which it was not presented.';
COMMENT ON COLUMN browser_tracking_table.expected_max_s IS 'Seconds: lifetime the server announced (largest).';
COMMENT ON COLUMN browser_tracking_table.verdict IS 'viable if any step was viable, n/a if the mechanism was never used, else blocked.';
COMMENT ON COLUMN browser_tracking_quic.token_presented IS 'The browser presented a QUIC address-validation token.';
COMMENT ON COLUMN browser_tracking_quic.ticket_presented IS 'The browser presented a TLS 1.3 ticket (PSK identity).';

COMMENT ON COLUMN run_progress.shards_done IS 'Shards committed as finished.';
COMMENT ON COLUMN run_progress.shards_failed IS 'Shards committed as failed.';
COMMENT ON COLUMN run_progress.shards_remaining IS 'Shards not committed yet (NULL for inline runs).';

COMMENT ON COLUMN model_tfo_revisit_failure.scan_run_id IS 'scan_run.id of the TFO load-balancing survey (tfo-lb).';
COMMENT ON COLUMN model_tfo_revisit_failure.revisit IS 'Revisit k >= 1 (= connection k+1).';
COMMENT ON COLUMN model_tfo_revisit_failure.failure_rate IS 'Share (0..1) of always-TFO hostnames whose revisit k reached an unseen address.';
COMMENT ON COLUMN model_tfo_revisit_failure.hostnames IS 'Always-TFO hostnames with that revisit.';
COMMENT ON COLUMN model_domain_tree_edge.scan_run_id IS 'scan_run.id of the page-load run.';
COMMENT ON COLUMN model_domain_tree_edge.site IS 'Root hostname of the visited page.';
COMMENT ON COLUMN model_domain_tree_edge.parent IS 'Hostname whose resource caused the child''s request (the root for itself).';
COMMENT ON COLUMN model_domain_tree_edge.child IS 'Hostname requested.';
COMMENT ON COLUMN model_site_hostname.scan_run_id IS 'scan_run.id of the page-load run.';
COMMENT ON COLUMN model_site_hostname.site IS 'Root hostname of the visited page.';
COMMENT ON COLUMN model_site_hostname.hostname IS 'A hostname of the site''s domain tree.';
COMMENT ON COLUMN model_trust_pair.scan_run_id IS 'scan_run.id of the TLS run (tls_handshake or tls_resumption) that showed the relation.';
COMMENT ON COLUMN model_trust_pair.site IS 'Site whose domain tree holds both hostnames.';
COMMENT ON COLUMN model_trust_pair.a IS 'One hostname (a < b).';
COMMENT ON COLUMN model_trust_pair.b IS 'The other hostname.';
COMMENT ON COLUMN model_trust_pair.source IS 'san (one certificate covers the other name) or resumption (a session of one resumed at the other).';
COMMENT ON COLUMN model_rtt_triplet.scan_run_id IS 'scan_run.id of the RIPE Atlas campaign.';
COMMENT ON COLUMN model_rtt_triplet.client IS 'Atlas probe id (text).';
COMMENT ON COLUMN model_rtt_triplet.rtt_dns_ms IS 'Milliseconds: probe to its same-AS resolver.';
COMMENT ON COLUMN model_rtt_triplet.rtt_server_ms IS 'Milliseconds: test server to that resolver.';
COMMENT ON COLUMN model_rtt_triplet.rtt_direct_ms IS 'Milliseconds: probe to test server.';
COMMENT ON COLUMN model_page_visit.scan_run_id IS 'scan_run.id of the page-load run.';
COMMENT ON COLUMN model_page_visit.visit_id IS 'browser_visit.id.';
COMMENT ON COLUMN model_page_visit.page IS 'URL requested.';
COMMENT ON COLUMN model_page_visit.recorded_plt_s IS 'Seconds: the logger''s page load time (until 95 % of resources received their last byte).';
COMMENT ON COLUMN model_page_resource.scan_run_id IS 'scan_run.id of the page-load run.';
COMMENT ON COLUMN model_page_resource.visit_id IS 'browser_visit.id.';
COMMENT ON COLUMN model_page_resource.resource_id IS 'browser_resource.resource_no as text.';
COMMENT ON COLUMN model_page_resource.parent_id IS 'Resource that caused this request (NULL for the root; the root when the parent is unknown).';
COMMENT ON COLUMN model_page_resource.server IS 'Hostname the resource came from.';
COMMENT ON COLUMN model_page_resource.size_bytes IS 'Bytes: encoded body size (0 if unknown).';
COMMENT ON COLUMN model_page_resource.redirect IS 'The request was a redirect hop (3xx or followed by a redirected request).';
COMMENT ON COLUMN model_page_server.scan_run_id IS 'scan_run.id of the page-load run.';
COMMENT ON COLUMN model_page_server.visit_id IS 'browser_visit.id.';
COMMENT ON COLUMN model_page_server.server IS 'Server hostname.';
COMMENT ON COLUMN model_page_server.tls IS 'Reached over https.';
COMMENT ON COLUMN model_page_server.tls_version IS 'Highest TLS version (1.3 or 1.2) any `scan tls` handshake with the hostname negotiated; NULL without TLS or handshake.';
COMMENT ON COLUMN model_page_server.h2 IS 'Some resource came over HTTP/2 or HTTP/3.';

-- view columns passed through from a table column: the table column's comment
DO $$
DECLARE
    r record;
    c text;
BEGIN
    FOR r IN SELECT * FROM (VALUES
        ('tfo_support_by_cut', 'run_id', 'tfo_probe', 'run_id'),
        ('tfo_lb_host', 'run_id', 'tfo_probe', 'run_id'), ('tfo_lb_host', 'hostname', 'tfo_probe', 'hostname'),
        ('tfo_lb_new_address', 'run_id', 'tfo_probe', 'run_id'),
        ('tfo_reuse_summary', 'run_id', 'tfo_reuse', 'run_id'), ('tfo_reuse_summary', 'control', 'tfo_reuse', 'control'),
        ('tls_support_v', 'run_id', 'tls_handshake', 'run_id'), ('tls_support_v', 'hostname', 'tls_handshake', 'hostname'),
        ('tls_support_v', 'version', 'tls_handshake', 'version'),
        ('tls_lifetime_hint_v', 'run_id', 'tls_handshake', 'run_id'),
        ('tls_lifetime_hint_v', 'hostname', 'tls_handshake', 'hostname'),
        ('tls_lifetime_hint_v', 'version', 'tls_handshake', 'version'),
        ('tls_lifetime_measured_v', 'run_id', 'tls_resumption', 'run_id'),
        ('tls_lifetime_measured_v', 'mechanism', 'tls_resumption', 'mechanism'),
        ('tls_lifetime_measured_v', 'version', 'tls_resumption', 'version'),
        ('tls_key_name_span_v', 'hostname', 'tls_handshake', 'hostname'),
        ('tls_key_name_span_v', 'version', 'tls_handshake', 'version'),
        ('tls_shared_group_size_v', 'run_id', 'tls_shared_group', 'run_id'),
        ('tls_shared_group_size_v', 'kind', 'tls_shared_group', 'kind'),
        ('tls_shared_group_size_v', 'group_id', 'tls_shared_group', 'group_id'),
        ('quic_support_host', 'run_id', 'quic_discovery', 'run_id'),
        ('quic_support_host', 'hostname', 'quic_discovery', 'hostname'),
        ('quic_support_by_cut', 'run_id', 'quic_discovery', 'run_id'),
        ('quic_handshake_host', 'run_id', 'quic_connection', 'run_id'),
        ('quic_handshake_host', 'hostname', 'quic_connection', 'hostname'),
        ('quic_handshake_host', 'address', 'quic_connection', 'address'),
        ('quic_handshake_host', 'purpose', 'quic_connection', 'purpose'),
        ('quic_handshake_host', 'status', 'quic_connection', 'status'),
        ('quic_handshake_host', 'version', 'quic_connection', 'version'),
        ('quic_handshake_host', 'alpn', 'quic_connection', 'alpn'),
        ('quic_handshake_host', 'retry', 'quic_connection', 'retry'),
        ('quic_handshake_host', 'handshake_ms', 'quic_connection', 'handshake_ms'),
        ('quic_handshake_host', 'session_resumed', 'quic_connection', 'session_resumed'),
        ('quic_handshake_host', 'early_data_sent', 'quic_connection', 'early_data_sent'),
        ('quic_handshake_host', 'early_data_accepted', 'quic_connection', 'early_data_accepted'),
        ('quic_handshake_host', 'n_tokens', 'quic_connection', 'n_tokens'),
        ('quic_handshake_host', 'n_tickets', 'quic_connection', 'n_tickets'),
        ('quic_handshake_host', 'cert_sha256', 'quic_connection', 'cert_sha256'),
        ('quic_handshake_host', 'close_code', 'quic_connection', 'close_code'),
        ('quic_handshake_host', 'close_reason', 'quic_connection', 'close_reason'),
        ('quic_tracking_summary', 'run_id', 'quic_turnover_host', 'run_id'),
        ('quic_tracking_summary', 'hostname', 'quic_turnover_host', 'hostname'),
        ('quic_tracking_summary', 'address', 'quic_turnover_host', 'address'),
        ('quic_tracking_summary', 'tokens_issued', 'quic_turnover_host', 'tokens_issued'),
        ('quic_tracking_summary', 'token_key_period_s', 'quic_turnover_host', 'token_key_period_s'),
        ('quic_tracking_summary', 'tickets_issued', 'quic_turnover_host', 'tickets_issued'),
        ('quic_tracking_summary', 'ticket_lifetime_s', 'quic_turnover_host', 'ticket_lifetime_s'),
        ('quic_tracking_summary', 'ticket_accept_max_age_s', 'quic_turnover_host', 'ticket_accept_max_age_s'),
        ('quic_tracking_summary', 'ticket_reject_min_age_s', 'quic_turnover_host', 'ticket_reject_min_age_s'),
        ('quic_tracking_summary', 'ticket_key_period_s', 'quic_turnover_host', 'ticket_key_period_s'),
        ('quic_tracking_summary', 'zero_rtt_accept_max_age_s', 'quic_turnover_host', 'zero_rtt_accept_max_age_s'),
        ('quic_tracking_summary', 'observed_s', 'quic_turnover_host', 'observed_s'),
        ('quic_lifetimes', 'run_id', 'quic_turnover_host', 'run_id'),
        ('quic_lifetimes', 'hostname', 'quic_turnover_host', 'hostname'),
        ('quic_lifetimes', 'address', 'quic_turnover_host', 'address'),
        ('dns_ttl_observation', 'run_id', 'dns_ttl_probe', 'run_id'),
        ('dns_ttl_observation', 'rank', 'dns_ttl_probe', 'rank'),
        ('dns_ttl_observation', 'hostname', 'dns_ttl_probe', 'hostname'),
        ('dns_ttl_observation', 'qtype', 'dns_ttl_probe', 'qtype'),
        ('dns_ttl_observation', 'ttl', 'dns_ttl_probe', 'ttl'),
        ('dns_ttl_observation', 'nameserver', 'dns_ttl_probe', 'nameserver'),
        ('dns_ttl_summary', 'run_id', 'dns_ttl_probe', 'run_id'),
        ('dns_ttl_summary', 'qtype', 'dns_ttl_probe', 'qtype'),
        ('dns_ttl_failure', 'run_id', 'dns_ttl_probe', 'run_id'),
        ('dns_ttl_failure', 'qtype', 'dns_ttl_probe', 'qtype'),
        ('dns_ttl_failure', 'outcome', 'dns_ttl_probe', 'outcome'),
        ('dns_ecs_scope_distribution', 'run_id', 'dns_ecs_probe', 'run_id'),
        ('dns_ecs_scope_distribution', 'subnet', 'dns_ecs_probe', 'subnet'),
        ('dns_ecs_scope_distribution', 'scope_prefix', 'dns_ecs_probe', 'scope_prefix'),
        ('dns_ecs_summary', 'run_id', 'dns_ecs_probe', 'run_id'),
        ('dns_ecs_summary', 'subnet', 'dns_ecs_probe', 'subnet'),
        ('atlas_failure', 'run_id', 'atlas_ping', 'run_id'),
        ('atlas_failure', 'prb_id', 'atlas_ping', 'prb_id'),
        ('atlas_resolver_rtt', 'run_id', 'atlas_ping', 'run_id'),
        ('atlas_resolver_rtt', 'prb_id', 'atlas_ping', 'prb_id'),
        ('atlas_resolver_rtt', 'sent', 'atlas_ping', 'sent'),
        ('atlas_resolver_rtt', 'rcvd', 'atlas_ping', 'rcvd'),
        ('atlas_rtt_triplet', 'run_id', 'atlas_ping', 'run_id'),
        ('atlas_rtt_triplet', 'prb_id', 'atlas_ping', 'prb_id'),
        ('browser_pageload_summary', 'run_id', 'browser_visit', 'run_id'),
        ('browser_pageload_summary', 'browser', 'browser_visit', 'browser'),
        ('browser_pageload_summary', 'url', 'browser_visit', 'url'),
        ('browser_pageload_summary', 'status', 'browser_visit', 'status'),
        ('browser_pageload_summary', 'n_resources', 'browser_visit', 'n_resources'),
        ('browser_pageload_summary', 'page_load_time_ms', 'browser_visit', 'page_load_time_ms'),
        ('browser_pageload_summary', 'tree_height', 'browser_visit', 'tree_height'),
        ('browser_pageload_summary', 'longest_new_conn_path', 'browser_visit', 'longest_new_conn_path'),
        ('browser_tracking_table', 'run_id', 'browser_track_verdict', 'run_id'),
        ('browser_tracking_table', 'browser', 'browser_track_verdict', 'browser'),
        ('browser_tracking_table', 'browser_version', 'browser_track_verdict', 'browser_version'),
        ('browser_tracking_table', 'os', 'browser_track_verdict', 'os'),
        ('browser_tracking_table', 'experiment', 'browser_track_verdict', 'experiment'),
        ('browser_tracking_table', 'mechanism', 'browser_track_verdict', 'mechanism'),
        ('browser_tracking_quic', 'run_id', 'browser_track_connection', 'run_id'),
        ('browser_tracking_quic', 'experiment', 'browser_track_connection', 'experiment'),
        ('browser_tracking_quic', 'step', 'browser_track_connection', 'step'),
        ('browser_tracking_quic', 'server_name', 'browser_track_connection', 'server_name'),
        ('browser_tracking_quic', 'client_port', 'browser_track_connection', 'client_port'),
        ('browser_tracking_quic', 'quic_token_status', 'browser_track_connection', 'quic_token_status'),
        ('browser_tracking_quic', 'quic_ticket_status', 'browser_track_connection', 'quic_ticket_status'),
        ('browser_tracking_quic', 'quic_session_resumed', 'browser_track_connection', 'quic_session_resumed'),
        ('browser_tracking_quic', 'quic_early_data_accepted', 'browser_track_connection', 'quic_early_data_accepted'),
        ('run_progress', 'id', 'scan_run', 'id'), ('run_progress', 'kind', 'scan_run', 'kind'),
        ('run_progress', 'status', 'scan_run', 'status'), ('run_progress', 'started_at', 'scan_run', 'started_at'),
        ('run_progress', 'finished_at', 'scan_run', 'finished_at'), ('run_progress', 'shards', 'scan_run', 'shards'),
        ('run_progress', 'counts', 'scan_run', 'counts')
    ) v(vw, col, src, src_col) LOOP
        SELECT col_description(a.attrelid, a.attnum) INTO c FROM pg_attribute a
        WHERE a.attrelid = r.src::regclass AND a.attname = r.src_col;
        IF c IS NULL THEN
            RAISE EXCEPTION '%.% has no comment to copy to %.%', r.src, r.src_col, r.vw, r.col;
        END IF;
        EXECUTE format('COMMENT ON COLUMN %I.%I IS %L', r.vw, r.col, c);
    END LOOP;
END $$;
