"""The DNS zoo's rows of `plot zoo-table`: per authoritative server of the DNS zoo and fact,
the implementation's documented default (cited; recorded in zoo_documented_default by
`netsurvey testbed zoo-record`), netsurvey's measurement (scan dns-ttl, scan dns-ecs) and kdig's
(scan dns-second-opinion). Rows have the shape of the TLS zoo rows (analysis/tls.py
zoo_table). Servers are told apart by address; per server the latest selected run of each
kind counts."""
from __future__ import annotations

#: (fact, name asked (relative to the zoo zone), documented value from the facts of a host)
_TTL_FACTS = [("ttl_s of a zone TTL 0", "ttl0", lambda f: max(0, f["ttl_min_s"]["value"]), "ttl_min_s"),
              ("ttl_s of a zone TTL 2147483647", "ttlmax", lambda f: min(2147483647, f["ttl_max_s"]["value"]),
               "ttl_max_s"),
              ("ttl_s of a zone TTL 30 days", "ttl30d", lambda f: min(2592000, f["ttl_max_s"]["value"]), "ttl_max_s")]


def _txt(v) -> str | None:
    if v is None:
        return None
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def _latest(conn, table: str, runs: list[int], cols: str, where: str = "TRUE") -> dict:
    """nameserver text -> rows of the latest run among ``runs`` that asked it. ``cols`` and
    ``where`` are this module's constant SQL fragments (never user data)."""
    from psycopg import sql

    ns_col = "nameserver" if table != "dns_ecs_probe" else "resolver"
    query = sql.SQL("SELECT host({ns}), run_id, {cols} FROM {table} WHERE run_id = ANY(%s) AND {where}"
                    " AND {ns} IS NOT NULL ORDER BY run_id").format(
        ns=sql.Identifier(ns_col), cols=sql.SQL(cols), table=sql.Identifier(table), where=sql.SQL(where))
    rows = conn.execute(query, (runs,)).fetchall()
    last: dict = {}
    for r in rows:
        last[r[0]] = max(last.get(r[0], 0), r[1])
    out: dict = {}
    for r in rows:
        if r[1] == last[r[0]]:
            out.setdefault(r[0], []).append(r[2:])
    return out


def zoo_rows(conn, ttl_runs: list[int], ecs_runs: list[int], so_runs: list[int]) -> list[tuple]:
    from .zoo_documented import servers

    hosts = servers(conn, "dns")     # recorded by `netsurvey testbed zoo-record`
    if not hosts:
        return []
    ttl = _latest(conn, "dns_ttl_probe", ttl_runs, "hostname, rcode, ttl, authority_count")
    ecs = _latest(conn, "dns_ecs_probe", ecs_runs, "hostname, subnet::text, source_prefix, scope_prefix")
    so = _latest(conn, "dns_second_opinion", so_runs,
                 "hostname, subnet::text, rcode, ttl, authority_count, source_prefix, scope_prefix, client",
                 "status = 'success'")
    rows = []
    for h in hosts:
        facts, zone = h.facts, h.zone
        ours_t = {r[0]: r[1:] for r in ttl.get(h.v4, [])}
        ours_e = {(r[0], r[1]): r[2:] for r in ecs.get(h.v4, [])}
        theirs = {(r[0], r[1]): r[2:] for r in so.get(h.v4, [])}
        if not (ours_t or ours_e or theirs):
            continue
        client = next((v[-1] for v in theirs.values()), None)
        host = f"{h.label} {h.v4}"

        def add(fact, doc, src, mine, other):
            doc, mine, other = _txt(doc), _txt(mine), _txt(other)
            if fact.startswith("ecs_scope") and doc is None and mine is None and other is None:
                return   # a server without ECS: no scope to show (its ecs_echo row says so)
            rows.append((host, fact, doc, src, None if doc is None or mine is None else
                         ("yes" if doc == mine else "NO"), mine, other, client if other is not None else None,
                         None if other is None or mine is None else ("yes" if other == mine else "NO")))

        for fact, name, doc_of, key in _TTL_FACTS:
            n = f"{name}.{zone}"
            add(fact, doc_of(facts) if key in facts else None, (facts.get(key) or {}).get("source"),
                (ours_t.get(n) or (None, None))[1], (theirs.get((n, None)) or (None, None))[1])
        www = f"www.{zone}"
        mr = facts.get("minimal_responses") or {}
        a = (ours_t.get(www) or (None, None, None))[2]
        b = (theirs.get((www, None)) or (None, None, None))[2]
        add("minimal_responses", mr.get("value"), mr.get("source"), None if a is None else a == 0,
            None if b is None else b == 0)
        for fact, name in (("nxdomain_rcode", f"nx.{zone}"), ("out_of_zone_rcode", "www.not-in-zoo.test")):
            d = facts.get(fact) or {}
            add(fact, d.get("value"), d.get("source"), (ours_t.get(name) or (None,))[0],
                (theirs.get((name, None)) or (None,))[0])
        subnets = sorted({s for (n, s) in ours_e if n == www} | {s for (n, s) in theirs if n == www and s})
        e = facts.get("ecs_echo") or {}
        mine = [ours_e[(www, s)][0] is not None for s in subnets if (www, s) in ours_e]
        other = [theirs[(www, s)][3] is not None for s in subnets if (www, s) in theirs]
        add("ecs_echo", e.get("value"), e.get("source"), all(mine) if mine else None,
            all(other) if other else None)
        for name, fact in ((www, "ecs_scope_static"), (f"ecs.{zone}", "ecs_scope_dynamic")):
            d = facts.get(fact) or facts.get("ecs_scope_static") or {}
            for s in subnets:
                doc = d.get("value")
                if isinstance(doc, dict):
                    doc = doc.get(s)
                m = ours_e.get((name, s))
                t = theirs.get((name, s))
                add(f"ecs_scope {name.split('.')[0]} {s}", doc, d.get("source"), m[1] if m else None,
                    t[4] if t else None)
    return rows
