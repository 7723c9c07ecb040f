-- 0075_blast_breakdown: BLAST's load-time analyses over the page-load logger's events
-- (issue 25, item 5; Wang, "Designing a Better Browser for Tor with BLAST", NDSS 2020,
-- /work/shared/seeds/000_6322d17e2de7bf06.txt, sec. II-C "Categorizing load time").
--
-- BLAST splits a resource's load time at its five events into four categories:
--   (1) created -> (2) dispatched = queue wait; (2) -> (3) first byte sent = "TLS wait"
--   (connection set-up: TCP, TLS); (3) -> (4) first byte received = server wait;
--   (4) -> (5) last byte received = transfer.
-- A page's load time is categorized along the resource tree: from the resource that
-- completes 95% of the page's resources up to the root, each resource contributes its
-- categories up to the moment its child on the path was created; a gap between a
-- resource's last byte and its child's creation is "non-categorized" (parsing, timers).

CREATE VIEW blast_resource_time AS
SELECT r.run_id, r.visit_id, r.resource_no, v.browser, r.hostname, r.protocol, r.connection_id,
       r.connection_reused, r.encoded_bytes,
       r.dispatched_ms - r.created_ms AS queue_ms,
       r.first_byte_sent_ms - r.dispatched_ms AS connection_ms,
       r.first_byte_received_ms - r.first_byte_sent_ms AS server_wait_ms,
       r.last_byte_received_ms - r.first_byte_received_ms AS transfer_ms,
       r.last_byte_received_ms - r.created_ms AS load_ms,
       (r.created_ms <= r.dispatched_ms AND r.dispatched_ms <= r.first_byte_sent_ms
        AND r.first_byte_sent_ms <= r.first_byte_received_ms
        AND r.first_byte_received_ms <= r.last_byte_received_ms) AS events_ordered,
       CASE WHEN r.connection_id IS NULL THEN NULL ELSE EXISTS (
           SELECT 1 FROM browser_resource o
           WHERE o.visit_id = r.visit_id AND o.connection_id = r.connection_id AND o.resource_no <> r.resource_no
             AND (o.first_byte_sent_ms, o.resource_no) < (r.first_byte_sent_ms, r.resource_no)
             AND o.last_byte_received_ms > r.first_byte_sent_ms
             -- a resource with the timing of an earlier load (events before its creation) was not on the wire
             AND o.created_ms <= o.dispatched_ms AND o.dispatched_ms <= o.first_byte_sent_ms) END AS on_busy_connection
FROM browser_resource r
JOIN browser_visit v ON v.id = r.visit_id
WHERE v.status = 'complete' AND r.failed IS NULL AND coalesce(r.from_cache, false) = false
  AND r.created_ms IS NOT NULL AND r.dispatched_ms IS NOT NULL AND r.first_byte_sent_ms IS NOT NULL
  AND r.first_byte_received_ms IS NOT NULL AND r.last_byte_received_ms IS NOT NULL;
COMMENT ON VIEW blast_resource_time IS 'BLAST resource load time split into its four categories (Wang 2020, sec. II-C), one row per resource of a complete visit that was neither served from the cache nor failed and has all five events. Use events_ordered to drop resources whose timing the browser took from an earlier load (events before the request was created).';
COMMENT ON COLUMN blast_resource_time.run_id IS 'scan_run (kind browser-pageload) of the visit.';
COMMENT ON COLUMN blast_resource_time.visit_id IS 'browser_visit.id.';
COMMENT ON COLUMN blast_resource_time.resource_no IS 'browser_resource.resource_no.';
COMMENT ON COLUMN blast_resource_time.browser IS 'Browser of the visit (chromium, firefox, webkit).';
COMMENT ON COLUMN blast_resource_time.hostname IS 'Host of the resource URL.';
COMMENT ON COLUMN blast_resource_time.protocol IS 'Application protocol of the response (http/1.1, h2, h3).';
COMMENT ON COLUMN blast_resource_time.connection_id IS 'Browser connection id (NULL when the browser reports none: Firefox BiDi, WebKit).';
COMMENT ON COLUMN blast_resource_time.connection_reused IS 'The request went over an already open connection.';
COMMENT ON COLUMN blast_resource_time.encoded_bytes IS 'Bytes received on the wire for the resource.';
COMMENT ON COLUMN blast_resource_time.queue_ms IS 'BLAST queue wait time: ms from request created (event 1) to dispatched (event 2).';
COMMENT ON COLUMN blast_resource_time.connection_ms IS 'BLAST "TLS wait time": ms from dispatched (event 2) to first request byte sent (event 3): connection set-up (TCP, TLS) on a new connection, ~0 on a reused one.';
COMMENT ON COLUMN blast_resource_time.server_wait_ms IS 'BLAST server wait time: ms from first request byte sent (event 3) to first response byte received (event 4); ideally one RTT.';
COMMENT ON COLUMN blast_resource_time.transfer_ms IS 'BLAST transfer time: ms from first (event 4) to last (event 5) response byte received.';
COMMENT ON COLUMN blast_resource_time.load_ms IS 'BLAST resource load time: ms from created (event 1) to last byte received (event 5) = the sum of the four categories.';
COMMENT ON COLUMN blast_resource_time.events_ordered IS 'The five events are in order (created <= dispatched <= sent <= first byte <= last byte). False e.g. for a resource Chromium answered from its memory of an earlier visit with that visit''s timing.';
COMMENT ON COLUMN blast_resource_time.on_busy_connection IS 'BLAST sec. IV-C3 head-of-line test: the request was sent on a connection that was still loading another resource of the visit (sent earlier, last byte later; resources whose events precede their creation do not count). Only possible with HTTP/2 multiplexing or pipelining. NULL when the browser reports no connection id.';

CREATE VIEW blast_page_time AS
WITH RECURSIVE res AS (
    SELECT r.visit_id, r.resource_no, r.parent_no, r.created_ms AS c,
           coalesce(r.dispatched_ms, r.created_ms) AS d,
           coalesce(r.first_byte_sent_ms, r.dispatched_ms, r.created_ms) AS s,
           coalesce(r.first_byte_received_ms, r.first_byte_sent_ms, r.dispatched_ms, r.created_ms) AS f,
           r.last_byte_received_ms AS l
    FROM browser_resource r JOIN browser_visit v ON v.id = r.visit_id
    WHERE v.status = 'complete'
), final AS (
    -- the logger's page load time is the last byte of the resource that completed 95% of
    -- the resources (a failed request counts as done when it failed, browser_probes/tree.py):
    -- the last resource that received its last byte by then ends the path
    SELECT DISTINCT ON (res.visit_id) res.visit_id, res.resource_no, res.l AS end_ms
    FROM res JOIN browser_visit v ON v.id = res.visit_id
    WHERE res.l IS NOT NULL AND res.l <= v.page_load_time_ms
    ORDER BY res.visit_id, res.l DESC, res.resource_no DESC
), path AS (
    SELECT f.visit_id, f.resource_no, f.end_ms AS cut_ms, 1 AS hops
    FROM final f
    UNION ALL
    SELECT p.visit_id, r.parent_no, r.c, p.hops + 1
    FROM path p JOIN res r ON r.visit_id = p.visit_id AND r.resource_no = p.resource_no
    WHERE r.parent_no IS NOT NULL AND p.hops < 10000
), seg AS (
    SELECT p.visit_id, p.cut_ms, r.c, r.d, r.s, r.f, least(coalesce(r.l, p.cut_ms), p.cut_ms) AS e
    FROM path p JOIN res r ON r.visit_id = p.visit_id AND r.resource_no = p.resource_no
)
SELECT v.run_id, v.id AS visit_id, v.browser, v.url, v.page_load_time_ms, fi.resource_no AS final_resource_no,
       fi.end_ms AS path_end_ms, count(*)::int AS path_resources,
       sum(greatest(least(d, e) - c, 0)) AS queue_ms,
       sum(greatest(least(s, e) - greatest(least(d, e), c), 0)) AS connection_ms,
       sum(greatest(least(f, e) - greatest(least(s, e), c), 0)) AS server_wait_ms,
       sum(greatest(e - greatest(least(f, e), c), 0)) AS transfer_ms,
       sum(greatest(cut_ms - greatest(e, c), 0)) AS uncategorized_ms
FROM seg JOIN browser_visit v ON v.id = seg.visit_id JOIN final fi ON fi.visit_id = seg.visit_id
GROUP BY v.run_id, v.id, v.browser, v.url, v.page_load_time_ms, fi.resource_no, fi.end_ms;
COMMENT ON VIEW blast_page_time IS 'BLAST page load time categorized along the resource tree (Wang 2020, sec. II-C): per complete visit, the path from the resource that completed 95% of the resources (the logger''s page load time) up to the root; each resource on it contributes its queue / connection / server-wait / transfer time until its child on the path was created, the rest is non-categorized. The five columns sum to path_end_ms minus the root''s creation (0).';
COMMENT ON COLUMN blast_page_time.run_id IS 'scan_run (kind browser-pageload) of the visit.';
COMMENT ON COLUMN blast_page_time.visit_id IS 'browser_visit.id.';
COMMENT ON COLUMN blast_page_time.browser IS 'Browser of the visit.';
COMMENT ON COLUMN blast_page_time.url IS 'Page URL requested.';
COMMENT ON COLUMN blast_page_time.page_load_time_ms IS 'The logger''s page load time (ms until 95% of resources were done; a failed request counts as done when it failed, so it exceeds path_end_ms when a failure completed the 95%).';
COMMENT ON COLUMN blast_page_time.final_resource_no IS 'resource_no of the resource that ends the path: the last one to receive its last byte by the logger''s page load time (the resource that completed 95% of the resources, unless a failed request did).';
COMMENT ON COLUMN blast_page_time.path_end_ms IS 'Last byte of that resource, ms since the root request was created: the time the five categories add up to.';
COMMENT ON COLUMN blast_page_time.path_resources IS 'Resources on the path from the final resource to the root (inclusive).';
COMMENT ON COLUMN blast_page_time.queue_ms IS 'Queue wait (created -> dispatched) summed along the path, ms.';
COMMENT ON COLUMN blast_page_time.connection_ms IS 'Connection set-up / "TLS wait" (dispatched -> first byte sent) summed along the path, ms.';
COMMENT ON COLUMN blast_page_time.server_wait_ms IS 'Server wait (first byte sent -> first byte received) summed along the path, ms.';
COMMENT ON COLUMN blast_page_time.transfer_ms IS 'Transfer (first -> last byte received) summed along the path, cut where the child on the path was created, ms.';
COMMENT ON COLUMN blast_page_time.uncategorized_ms IS 'Non-categorized time: gaps between a resource''s last byte and its child''s creation on the path (parsing, timed scripts), ms.';
