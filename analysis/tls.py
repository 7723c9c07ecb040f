"""TLS session-resumption figures (thesis Fig 4.5-4.10, Table 5.3). Every number is
computed in PostgreSQL from the views of schema/0003_tls.sql."""
from __future__ import annotations

from netsurvey.errors import UsageError

from . import thesis_overlay
from .engine import cdf
from .figures import FigureContext, figure
from .style import new_figure, series_style, step_cdf
from .thesis_reference import for_figure


def _runs(ctx: FigureContext, kind: str) -> list[int]:
    return list(ctx.run_ids(kind))


@figure("tls-support", sources=["tls_support_v"], thesis="Fig 4.5")
def tls_support(ctx: FigureContext) -> None:
    """Share of hosts supporting session IDs, tickets, both, per TLS version."""
    runs = _runs(ctx, "tls")
    with ctx.db.connect() as conn:
        rows = conn.execute(
            """SELECT version, count(*)::int AS hosts,
                      count(*) FILTER (WHERE supports_id)::int,
                      count(*) FILTER (WHERE supports_ticket)::int,
                      count(*) FILTER (WHERE supports_id AND supports_ticket)::int,
                      count(*) FILTER (WHERE NOT supports_id AND NOT supports_ticket)::int
               FROM tls_support_v WHERE run_id = ANY(%s) GROUP BY version ORDER BY version""", (runs,)).fetchall()
    ctx.write_csv(["version", "hosts", "session_id", "ticket", "both", "neither"], rows)
    fig, ax = new_figure("TLS version", "share of hosts [%]")
    labels = ["session_id", "ticket", "both", "neither"]
    width = 0.2
    for i, lab in enumerate(labels):
        xs = [k + (i - 1.5) * width for k in range(len(rows))]
        ax.bar(xs, [100 * r[2 + i] / r[1] if r[1] else 0 for r in rows], width, label=lab)
    ax.set_xticks(range(len(rows)), [f"TLS {r[0]} (n={r[1]})" for r in rows])
    ax.set_ylim(0, 105)
    ax.legend()
    # the thesis measured before TLS 1.3 was final: its shares are TLS 1.2 shares (Fig 4.5)
    k12 = next((k for k, r in enumerate(rows) if r[0] == "1.2"), None)
    r12 = rows[k12] if k12 is not None else None
    with ctx.db.connect() as conn:
        sites = conn.execute("SELECT count(DISTINCT hostname)::int FROM tls_support_v WHERE run_id = ANY(%s)",
                             (runs,)).fetchone()[0]
    thesis_overlay.apply(
        ctx, ax, ours={"share_session_id": 100 * r12[2] / r12[1] if r12 and r12[1] else None,
                       "share_ticket": 100 * r12[3] / r12[1] if r12 and r12[1] else None, "n_tls_sites": sites},
        position=lambda ref: ("marker", k12 + (labels.index(ref.series) - 1.5) * width, ref.value)
        if k12 is not None and ref.series in labels else None)
    ctx.save(fig)


def _hint_cdf(ctx: FigureContext, logx: bool) -> None:
    runs = list(ctx.runs_of_kind("tls")) if ctx.runs else _runs(ctx, "tls")
    # rank: the host's top-list rank in the run, for the values the thesis states per top list
    hint_src = ("SELECT v.lifetime_s AS value, v.version AS grp, (SELECT min(h.rank) FROM tls_handshake h"
                " WHERE h.run_id = v.run_id AND h.hostname = v.hostname) AS rank"
                " FROM tls_lifetime_hint_v v WHERE v.run_id = ANY(%s)")
    measured_src = ("SELECT max_resumed_age_s AS value, mechanism || ' TLS ' || version AS grp "
                    "FROM tls_lifetime_measured_v WHERE run_id = ANY(%s)")
    cdfs = cdf(ctx.db, hint_src, (runs,))
    measured, lruns = [], []
    if not logx:
        # the measured line comes from the tls-lifetime run(s) given with --run, else the latest one
        try:
            lruns = list(ctx.runs_of_kind("tls-lifetime"))
        except UsageError:
            lruns = []
        if lruns:
            measured = cdf(ctx.db, measured_src, (lruns,))
        ctx.notes["measured_runs"] = lruns
    # log axis whenever the values span more than a decade (hints run from minutes to days)
    values = [v for c in [*cdfs, *measured] for v in c.values if v > 0]
    log_axis = logx or (bool(values) and max(values) / min(values) > 10)
    fig, ax = new_figure("lifetime [s]", "CDF of hosts", logx=log_axis)
    rows = []
    for i, c in enumerate(cdfs):
        step_cdf(ax, list(c.values), list(c.probs), label=f"hint TLS {c.group} (n={c.n})", **series_style(i))
        rows += [("hint", c.group, v, p) for v, p in zip(c.values, c.probs)]
        ctx.sample(c.n, f"hosts with a TLS {c.group} ticket hint")
    for j, c in enumerate(measured):
        step_cdf(ax, list(c.values), list(c.probs), label=f"measured {c.group} (n={c.n})",
                 **series_style(len(cdfs) + j, dashed=True))
        rows += [("measured", c.group, v, p) for v, p in zip(c.values, c.probs)]
        ctx.sample(c.n, f"hosts measured ({c.group})")
    ax.legend()
    ctx.write_csv(["series", "group", "lifetime_s", "cdf"], rows)
    # values about the measured lifetimes (a mechanism's series, "ticket TLS 1.2") come from the
    # tls-lifetime run(s), the rest from the hints
    ours = {r.key: thesis_overlay.ours_from_source(ctx.db, measured_src, (lruns,), r) if lruns else None
            for r in for_figure(ctx.name) if r.stat == "share_null" or " TLS " in (r.series or "")}
    thesis_overlay.apply(ctx, ax, source=hint_src, params=(runs,), ours=ours)
    ctx.save(fig)


@figure("tls-lifetime-hint", sources=["tls_lifetime_hint_v", "tls_lifetime_measured_v"], thesis="Fig 4.6")
def tls_lifetime_hint(ctx: FigureContext) -> None:
    """CDF of hinted ticket lifetimes and of the measured maximum lifetimes."""
    _hint_cdf(ctx, logx=False)


@figure("tls-lifetime-hint-tail", sources=["tls_lifetime_hint_v"], thesis="Fig 4.7")
def tls_lifetime_hint_tail(ctx: FigureContext) -> None:
    """CDF of hinted lifetimes on a log axis (the long tail)."""
    _hint_cdf(ctx, logx=True)


@figure("tls-lifetime-measured", sources=["tls_lifetime_measured_v"], thesis="Fig 4.8")
def tls_lifetime_measured(ctx: FigureContext) -> None:
    """CDF of measured maximum resumption lifetimes per mechanism and version."""
    runs = _runs(ctx, "tls-lifetime")
    src = ("SELECT max_resumed_age_s AS value, mechanism || ' TLS ' || version AS grp "
           "FROM tls_lifetime_measured_v WHERE run_id = ANY(%s)")
    cdfs = cdf(ctx.db, src, (runs,))
    fig, ax = ctx.cdf_figure(cdfs, "measured maximum resumption lifetime [s]", "CDF of hosts",
                             ["group", "max_resumed_age_s", "cdf"], save=False)
    thesis_overlay.apply(ctx, ax, source=src, params=(runs,))
    ctx.save(fig)


@figure("tls-shared-groups", sources=["tls_shared_group_size_v"], thesis="Fig 4.9")
def tls_shared_groups(ctx: FigureContext) -> None:
    """CDF over hosts (each host weighted once, as the thesis) of the size of its shared-state group."""
    runs = _runs(ctx, "tls-shared")
    # one row per member: a group of 40 hosts counts 40 times, a singleton once
    src = ("SELECT g.size AS value, g.kind AS grp FROM tls_shared_group_size_v g"
           " CROSS JOIN LATERAL unnest(g.members) m WHERE g.run_id = ANY(%s)")
    cdfs = cdf(ctx.db, src, (runs,))
    for c in cdfs:
        ctx.sample(c.n, f"hosts ({c.group})")
    fig, ax = ctx.cdf_figure(cdfs, "size of the host's group [hosts]", "CDF of hosts", ["kind", "size", "cdf"],
                             label="{group} (n={n} hosts)", save=False)
    thesis_overlay.apply(ctx, ax, source=src, params=(runs,))
    ctx.save(fig)


@figure("tls-shared-table", sources=["tls_shared_group_size_v"], thesis="Table 5.3")
def tls_shared_table(ctx: FigureContext) -> None:
    """Table 5.3: groups by resumption, by SAN trust and by their union (count, mean and largest size)."""
    runs = _runs(ctx, "tls-shared")
    with ctx.db.connect() as conn:
        rows = conn.execute(
            """SELECT kind, count(*) FILTER (WHERE size > 1)::int AS groups,
                      coalesce(sum(size) FILTER (WHERE size > 1), 0)::int AS hosts_in_groups,
                      sum(size)::int AS hosts,
                      round(avg(size) FILTER (WHERE size > 1), 2)::float8 AS mean_group_size,
                      max(size)::int AS largest,
                      (array_agg(array_to_string(members, ' ') ORDER BY size DESC, members))[1] AS largest_members
               FROM tls_shared_group_size_v WHERE run_id = ANY(%s) GROUP BY kind ORDER BY kind""",
            (runs,)).fetchall()
    for r in rows:
        ctx.sample(r[3], f"hosts ({r[0]})")
    # Table 5.3's mean trust-group size per domain tree (singletons included), by kind
    thesis = {r.series: r.value for r in for_figure(ctx.name)}
    ctx.write_csv(["kind", "groups_size_gt1", "hosts_in_groups", "hosts", "mean_group_size_gt1", "largest",
                   "largest_members", "thesis_mean_group_size"], [(*r, thesis.get(r[0])) for r in rows])
    # ours: mean size over all groups of the run (the view has no domain trees)
    thesis_overlay.apply(ctx, None, source="SELECT size AS value, kind AS grp FROM tls_shared_group_size_v"
                                           " WHERE run_id = ANY(%s)", params=(runs,))


@figure("tls-root-trust-group", sources=["tls_shared_group", "tls_shared_group_size_v"], thesis="Fig 5.4")
def tls_root_trust_group(ctx: FigureContext) -> None:
    """CDF over sites of the trust relations of the site's root hostname: the size of the
    group (resumption / SAN / union) that holds the root, minus the root itself.

    A site's root is a hostname of the run none of whose parent domains is also in the run
    (www.a.test and cdn.a.test belong to the root a.test); the thesis's roots are the
    Alexa Top 1K sites and their domain trees come from page loads. The thesis cuts its
    plot at a group size of 25: so does the x axis here (the CSV has every value)."""
    runs = _runs(ctx, "tls-shared")
    src = ("SELECT (s.size - 1) AS value, g.kind AS grp FROM tls_shared_group g"
           " JOIN tls_shared_group_size_v s ON s.run_id = g.run_id AND s.kind = g.kind AND s.group_id = g.group_id"
           " WHERE g.run_id = ANY(%s) AND NOT EXISTS (SELECT 1 FROM tls_shared_group p"
           "  WHERE p.run_id = g.run_id AND p.kind = g.kind AND length(g.hostname) > length(p.hostname)"
           "  AND right(g.hostname, length(p.hostname) + 1) = '.' || p.hostname)")
    cdfs = cdf(ctx.db, src, (runs,))
    for c in cdfs:
        ctx.sample(c.n, f"sites ({c.group})")
    fig, ax = ctx.cdf_figure(cdfs, "trust relations of the site's root hostname [hostnames]", "CDF of sites",
                             ["kind", "relations", "cdf"], label="{group} (n={n} sites)", save=False)
    if ax is not None:
        ax.set_xlim(left=-0.5, right=25)
    thesis_overlay.apply(ctx, ax, source=src, params=(runs,))
    ctx.save(fig)


@figure("tls-key-rotation", sources=["tls_handshake"], thesis="Fig 4.10")
def tls_key_rotation(ctx: FigureContext) -> None:
    """CDF over hosts of the longest time one key_name was observed (STEK lifetime lower bound).
    Only tickets whose layout has a key id count (tls_handshake.ticket_key_id_len > 0)."""
    # rotation shows across repeated scans: --run picks them, else every finished tls run
    runs = list(ctx.runs_of_kind("tls", all_finished=True))
    src = ("SELECT max(span_s) AS value, version AS grp FROM ("
           " SELECT hostname, version, key_name,"
           "        extract(epoch FROM max(observed_at) - min(observed_at))::float8 AS span_s"
           " FROM tls_handshake WHERE key_name IS NOT NULL AND run_id = ANY(%s)"
           # rotation only where the ticket layout has a key id (issue 24: a Go
           # ticket's random IV is no key name); pre-0020 rows have no layout
           " AND coalesce(ticket_key_id_len, 16) > 0"
           " GROUP BY hostname, version, key_name) k GROUP BY hostname, version")
    cdfs = cdf(ctx.db, src, (runs,))
    for c in cdfs:
        ctx.sample(c.n, f"hosts with TLS {c.group} tickets")
    fig, ax = ctx.cdf_figure(cdfs, "longest observed use of one key_name [s]", "CDF of hosts",
                             ["version", "span_s", "cdf"], label="TLS {group} (n={n})", save=False)
    thesis_overlay.apply(ctx, ax, source=src, params=(runs,))
    ctx.save(fig)


#: zoo-table facts: (fact, SQL over tls_handshake rows of one hostname, second-opinion
#: (version, mechanism) measuring the same fact or None, the key of the zoo's documented
#: default in zoo_documented_default.fact)
_ZOO_FACTS = [
    ("session_id_resumption_tls12", "bool_or(id_resumed) FILTER (WHERE version = '1.2')::text", ("1.2", "id"),
     "session_ids"),
    ("ticket_resumption_tls12", "bool_or(ticket_resumed) FILTER (WHERE version = '1.2')::text", ("1.2", "ticket"),
     "tickets"),
    ("ticket_resumption_tls13", "bool_or(ticket_resumed) FILTER (WHERE version = '1.3')::text", ("1.3", "ticket"),
     "tickets"),
    ("tls12_lifetime_hint_s", "string_agg(DISTINCT ticket_lifetime::text, '|') FILTER (WHERE version = '1.2')",
     ("1.2", "lifetime-hint"), "tls12_lifetime_hint_s"),
    ("tls13_ticket_lifetime_s", "string_agg(DISTINCT ticket_lifetime::text, '|') FILTER (WHERE version = '1.3')",
     ("1.3", "lifetime-hint"), "tls13_ticket_lifetime_s"),
    ("tls13_ticket_count", "string_agg(DISTINCT ticket_count::text, '|') FILTER (WHERE version = '1.3')", None,
     "tls13_ticket_count"),
    # 0-RTT: netsurvey reads whether the server's TLS 1.3 tickets carry an early_data
    # extension; sslyze whether one byte of early data was accepted on a resumption (a server
    # that offers early data normally accepts it; the documented value is the offer)
    ("tls13_early_data", "bool_or(max_early_data IS NOT NULL) FILTER (WHERE version = '1.3')::text",
     ("1.3", "early-data"), "tls13_max_early_data"),
    ("ticket_family", "string_agg(DISTINCT ticket_family, '|')", None, "ticket_family"),
    ("ticket_key_id_len", "string_agg(DISTINCT ticket_key_id_len::text, '|')", None, "ticket_key_id_len"),
]


def _documented(conn) -> dict:
    """hostname -> documented (cited) facts of the TLS zoos' servers, from the database
    (zoo_documented_default, written by `netsurvey testbed zoo-record`); {} if none recorded."""
    from .zoo_documented import servers

    return {s.hostname: s.facts for s in servers(conn, "tls", "tls2") if s.hostname}


#: facts whose documented value is derived from a ground-truth entry of another shape
_DOC_OF = {"tls13_early_data": lambda v: v is not None}   # max_early_data bytes or None -> offered


#: (zoo host label, fact, client name) -> why that client's verdict differs from netsurvey's
#: measurement (and the documented default): a disagreement that was checked and explained
_SECOND_OPINION_NOTES = {
    ("gotls", "ticket_resumption_tls12", "sslyze"):
        "sslyze counts a TLS 1.2 ticket resumption only when the session keeps the offered ticket "
        "(plugins/session_resumption/_resumption_with_ticket.py); Go resumes and always sends a new ticket "
        "(go1.26 crypto/tls handshake_server.go doResumeHandshake: 'We always send a new session ticket'); "
        "openssl s_client -msg sees Reused + a NewSessionTicket",
    ("jsse", "ticket_resumption_tls12", "sslyze"):
        "sslyze counts a TLS 1.2 ticket resumption only when the session keeps the offered ticket; JSSE "
        "resumes and sends a new ticket (measured: openssl s_client -msg sees Reused + a NewSessionTicket)",
    ("rustls-tickets", "ticket_resumption_tls12", "sslyze"):
        "sslyze counts a TLS 1.2 ticket resumption only when the session keeps the offered ticket; rustls with "
        "Ticketer::new() resumes and sends a new ticket (measured: openssl s_client -msg sees Reused + a "
        "NewSessionTicket)",
}


def _note(hostname: str, fact: str, client: str | None) -> str | None:
    if not client:
        return None
    return _SECOND_OPINION_NOTES.get((hostname.split(".")[0], fact, client.split(" ")[0]))


def _as_text(v) -> str | None:
    """A ground-truth value in the SQL text form of the measured column."""
    if v is None:
        return None
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


@figure("zoo-table", sources=["tls_handshake", "tls_second_opinion", "dns_ttl_probe", "dns_ecs_probe",
                                "dns_second_opinion", "quic_discovery", "quic_connection", "quic_token", "quic_ticket",
                                "quic_second_opinion"], thesis="testbed zoo validation (no thesis counterpart)")
def zoo_table(ctx: FigureContext) -> None:
    """Per host and fact: the implementation's documented default (cited; the zoo's ground
    truth as `netsurvey testbed zoo-record` recorded it in the database), netsurvey's measurement (scan tls) and each independent client's
    verdict (scan tls-second-opinion: gnutls-cli, testssl.sh, sslyze) where it measures the same
    fact - one row per client, or one row without a client. The DNS zoo's servers follow
    (analysis/dns_zoo.py: scan dns-ttl / dns-ecs against kdig, scan dns-second-opinion), then
    the QUIC zoo's (analysis/quic_zoo.py: scan quic-discover / scan quic against ngtcp2's
    client, scan quic-second-opinion). The note column says why a value differs from the
    documented one or from the second opinion, and where no second opinion exists, why."""
    from netsurvey.errors import UsageError

    def runs(kind: str, **kw) -> list[int]:
        try:
            return list(ctx.runs_of_kind(kind, **kw))
        except UsageError:
            return []

    tls_runs = runs("tls")
    # the DNS zoo asks one server per run: every selected (else finished) run of these kinds
    dns = [runs(k, all_finished=not ctx.runs) for k in ("dns-ttl", "dns-ecs", "dns-second-opinion")]
    quic = [runs(k, all_finished=not ctx.runs) for k in ("quic-discover", "quic", "quic-second-opinion")]
    if not tls_runs and not dns[0] and not dns[1] and not quic[0] and not quic[1]:
        raise UsageError("zoo-table: no finished 'tls', 'dns-ttl', 'dns-ecs', 'quic-discover' or 'quic' run in the "
                         "database")
    so_runs = runs("tls-second-opinion")
    cols = ", ".join(f"{sql} AS f{i}" for i, (_, sql, _, _) in enumerate(_ZOO_FACTS))
    with ctx.db.connect() as conn:
        ours = conn.execute(f"SELECT hostname, {cols} FROM tls_handshake WHERE run_id = ANY(%s) AND status = 'success'"
                            " GROUP BY hostname ORDER BY hostname", (tls_runs,)).fetchall()
        theirs: dict = {}
        for h, v, m, client, r in conn.execute(
                "SELECT hostname, version, mechanism, client, CASE WHEN mechanism = 'lifetime-hint'"
                " THEN string_agg(DISTINCT lifetime_hint_s::text, '|') WHEN mechanism = 'early-data'"
                " THEN bool_or(early_data_accepted)::text ELSE bool_or(resumed)::text END"
                " FROM tls_second_opinion WHERE run_id = ANY(%s) AND status = 'success' AND version IS NOT NULL"
                " GROUP BY 1, 2, 3, 4 ORDER BY 4", (so_runs,)):
            if r is not None:
                theirs.setdefault((h, v, m), []).append((r, client))
        documented = _documented(conn)
    rows = []
    for r in ours:
        facts = documented.get(r[0], {})
        for i, (fact, _, so, key) in enumerate(_ZOO_FACTS):
            mine = r[1 + i]
            doc = facts.get(key) or {}
            doc_value, doc_source = doc.get("value"), doc.get("source")
            if fact in _DOC_OF and doc:
                doc_value = _DOC_OF[fact](doc_value)
            doc_value = _as_text(doc_value)
            matches = None if doc_value is None or mine is None else ("yes" if doc_value == mine else "NO")
            for other, client in (theirs.get((r[0], *so)) if so else None) or [(None, None)]:
                agree = None if other is None or mine is None else ("yes" if other == mine else "NO")
                rows.append((r[0], fact, doc_value, doc_source, matches, mine, other, client, agree,
                             _note(r[0], fact, client) if agree == "NO" else None))
    from .dns_zoo import zoo_rows

    with ctx.db.connect() as conn:
        dns_rows = zoo_rows(conn, *dns)
    rows += [(*r, None) for r in dns_rows]
    from .quic_zoo import zoo_rows as quic_zoo_rows

    with ctx.db.connect() as conn:
        quic_rows = quic_zoo_rows(conn, *quic)
    rows += quic_rows
    ctx.sample(len(ours) + len({r[0] for r in dns_rows}) + len({r[0].split(":")[0] for r in quic_rows}), "hosts")
    ctx.write_csv(["hostname", "fact", "documented", "documented_source", "netsurvey_matches_documented",
                   "netsurvey", "second_opinion", "second_opinion_client", "agree", "note"], rows)
