"""Reading model inputs: the documented files (analysis/README.md) or the ``model_*`` views
of the database. Bad input raises UsageError naming the file and what is wrong."""
from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any, Optional

from netsurvey.db import Database
from netsurvey.errors import UsageError

from .pageload import Page, Resource, Server
from .quic import RttTriplet
from .trust import Site

#: Views the models read when no --input file is given (created by the scanner migrations).
VIEWS = {
    "tfo-revisits": ["model_tfo_revisit_failure"],
    "tls-across-hostnames": ["model_domain_tree_edge", "model_trust_pair"],
    "shared-address-validation": ["model_domain_tree_edge", "model_trust_pair"],
    "quicsocks": ["model_rtt_triplet"],
    "prolongation": ["model_dns_query"],
    "pageload": ["model_page_visit", "model_page_resource", "model_page_server"],
}


def _json(path: Path) -> Any:
    if not path.exists():
        raise UsageError(f"{path}: file not found")
    try:
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".jsonl":
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        return json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: not valid JSON: {exc}") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _csv_rows(path: Path, ncols: int) -> list[list[str]]:
    if not path.exists():
        raise UsageError(f"{path}: file not found")
    rows = []
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            for i, row in enumerate(csv.reader(fh), 1):
                if not row or row[0].startswith("#"):
                    continue
                if len(row) != ncols:
                    raise UsageError(f"{path}:{i}: expected {ncols} columns, got {len(row)}")
                rows.append((i, row))
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x})") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if rows:
        try:
            float(rows[0][1][-1])
        except ValueError:
            rows = rows[1:]  # header
    return rows


def _num(path: Path, line: int, value: str, what: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise UsageError(f"{path}:{line}: {what} {value!r} is not a number") from None


def check_views(db: Database, model: str) -> None:
    """UsageError naming the missing view(s) if the database cannot feed ``model``."""
    with db.connect() as conn:
        missing = [v for v in VIEWS.get(model, []) if conn.execute("SELECT to_regclass(%s)", (v,)).fetchone()[0] is None]
    if missing:
        raise UsageError(f"{model}: the database has no {', '.join(missing)} (no such measurement yet); "
                         f"give --input FILE")


# -- tfo-revisits ---------------------------------------------------------------------
def failure_rates_file(path: Path) -> list[float]:
    if path.suffix == ".json":
        data = _json(path)
        rates = data.get("failure_rates") if isinstance(data, dict) else data
        if not isinstance(rates, list):
            raise UsageError(f"{path}: expected {{\"failure_rates\": [...]}}")
        return [float(x) for x in rates]
    rows = sorted(((int(_num(path, i, r[0], "revisit")), _num(path, i, r[1], "failure_rate")) for i, r in _csv_rows(path, 2)))
    return [f for _, f in rows]


def failure_rates_db(db: Database, runs: tuple[int, ...] = ()) -> tuple[list[float], list[int]]:
    check_views(db, "tfo-revisits")
    with db.connect() as conn:
        # one survey's rates (revisit 1..N): the given run, else the newest survey in the view
        cond, params = ("WHERE scan_run_id = ANY(%s)", [list(runs)]) if runs else \
            ("WHERE scan_run_id = (SELECT max(scan_run_id) FROM model_tfo_revisit_failure)", [])
        rows = conn.execute(f"SELECT revisit, failure_rate, scan_run_id FROM model_tfo_revisit_failure {cond} "
                            "ORDER BY revisit", params).fetchall()
    if not rows:
        raise UsageError("model_tfo_revisit_failure holds no rows for the selected runs")
    if len({r[2] for r in rows}) > 1:
        raise UsageError("model_tfo_revisit_failure: give one --run (each survey has its own revisit series)")
    return [float(r[1]) for r in rows], sorted({r[2] for r in rows})


# -- domain trees ----------------------------------------------------------------------
def _site(obj: dict, where: str) -> Site:
    try:
        root = obj["root"]
        edges = tuple((str(p), str(c)) for p, c in obj.get("edges", []))
        groups = [tuple(map(str, g)) for g in obj.get("groups", [])]
        groups += [(str(a), str(b)) for a, b in obj.get("trust_pairs", [])]
        conns = tuple((str(h), int(n)) for h, n in obj.get("connections", {}).items())
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"{where}: bad site record ({exc!r}); expected root, edges, groups/trust_pairs") from None
    return Site(root=str(root), edges=edges, groups=tuple(groups), connections=conns)


def sites_file(path: Path) -> list[Site]:
    data = _json(path)
    items = data.get("sites") if isinstance(data, dict) else data
    if not isinstance(items, list) or not items:
        raise UsageError(f"{path}: expected {{\"sites\": [...]}} with at least one site")
    return [_site(s, f"{path}: site {i}") for i, s in enumerate(items, 1)]


def sites_db(db: Database, trust: str = "union", runs: tuple[int, ...] = ()) -> list[Site]:
    """Domain trees from ``model_domain_tree_edge(site, parent, child)`` and trust pairs
    from ``model_trust_pair(site, a, b, source)`` (source 'san' or 'resumption')."""
    check_views(db, "tls-across-hostnames")
    sources = {"san": ["san"], "resumption": ["resumption"], "union": ["san", "resumption"]}[trust]
    with db.connect() as conn:
        edges = conn.execute("SELECT site, parent, child FROM model_domain_tree_edge ORDER BY 1, 2, 3").fetchall()
        pairs = conn.execute("SELECT site, a, b FROM model_trust_pair WHERE source = ANY(%s) ORDER BY 1, 2, 3",
                             (sources,)).fetchall()
    by_site: dict[str, dict] = {}
    for s, p, c in edges:
        by_site.setdefault(s, {"root": s, "edges": [], "trust_pairs": []})["edges"].append((p, c))
    for s, a, b in pairs:
        if s in by_site:
            by_site[s]["trust_pairs"].append((a, b))
    if not by_site:
        raise UsageError("model_domain_tree_edge holds no domain trees")
    return [_site(v, f"site {k}") for k, v in sorted(by_site.items())]


# -- quicsocks -------------------------------------------------------------------------
def triplets_file(path: Path) -> list[RttTriplet]:
    if path.suffix == ".json":
        data = _json(path)
        items = data.get("clients") if isinstance(data, dict) else data
        try:
            return [RttTriplet(str(d.get("client", i)), float(d["rtt_dns"]), float(d["rtt_server"]), float(d["rtt_direct"]))
                    for i, d in enumerate(items, 1)]
        except (KeyError, TypeError, ValueError) as exc:
            raise UsageError(f"{path}: bad client record ({exc!r}); expected rtt_dns, rtt_server, rtt_direct (ms)") from None
    return [RttTriplet(r[0], _num(path, i, r[1], "rtt_dns"), _num(path, i, r[2], "rtt_server"),
                       _num(path, i, r[3], "rtt_direct")) for i, r in _csv_rows(path, 4)]


def triplets_db(db: Database, runs: tuple[int, ...] = ()) -> tuple[list[RttTriplet], list[int]]:
    check_views(db, "quicsocks")
    with db.connect() as conn:
        cond, params = ("WHERE scan_run_id = ANY(%s)", [list(runs)]) if runs else ("", [])
        rows = conn.execute(f"SELECT client, rtt_dns_ms, rtt_server_ms, rtt_direct_ms, scan_run_id "
                            f"FROM model_rtt_triplet {cond} ORDER BY client", params).fetchall()
    if not rows:
        raise UsageError("model_rtt_triplet holds no rows for the selected runs")
    return [RttTriplet(str(r[0]), float(r[1]), float(r[2]), float(r[3])) for r in rows], sorted({r[4] for r in rows})


# -- pageload --------------------------------------------------------------------------
def _page(obj: dict, where: str) -> Page:
    try:
        servers = tuple(Server(name=str(s["name"]), tls=bool(s.get("tls", True)), tls_version=str(s.get("tls_version", "1.3")),
                               h2=bool(s.get("h2", False)), group=s.get("group")) for s in obj.get("servers", []))
        resources = tuple(Resource(id=str(r["id"]), server=str(r["server"]), size=int(r.get("size", 0)),
                                   parent=None if r.get("parent") is None else str(r["parent"]),
                                   redirect=bool(r.get("redirect", False)), prefetchable=bool(r.get("prefetchable", False)))
                          for r in obj["resources"])
        rec = obj.get("recorded_plt_s")
        return Page(str(obj.get("name", where)), resources, servers, None if rec is None else float(rec))
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"{where}: bad page record ({exc!r})") from None


def pages_file(path: Path) -> tuple[list[Page], dict]:
    data = _json(path)
    items = data.get("pages") if isinstance(data, dict) else data
    if not isinstance(items, list) or not items:
        raise UsageError(f"{path}: expected {{\"pages\": [...]}} with at least one page")
    params = {k: data[k] for k in ("rtt_s", "bandwidth_Bps") if isinstance(data, dict) and k in data}
    return [_page(p, f"{path}: page {i}") for i, p in enumerate(items, 1)], params


#: The prefetch database (BLAST sec. V-D): a resource is prefetched if its URL occurs in at
#: least 90% of the instances of its page; we also need two instances (one visit shows
#: nothing about stability: BLAST's pages had up to 5 instances each, top 10 more).
PREFETCH_MIN_SHARE = 0.9
PREFETCH_MIN_VISITS = 2


def pages_db(db: Database, runs: tuple[int, ...] = ()) -> list[Page]:
    check_views(db, "pageload")
    with db.connect() as conn:
        cond, params = ("WHERE scan_run_id = ANY(%s)", [list(runs)]) if runs else ("", [])
        visits = conn.execute(f"SELECT visit_id, page, recorded_plt_s FROM model_page_visit {cond} ORDER BY 1", params).fetchall()
        ids = [v[0] for v in visits]
        res = conn.execute("SELECT r.visit_id, r.resource_id, r.parent_id, r.server, r.size_bytes, r.redirect, b.url"
                           " FROM model_page_resource r JOIN browser_resource b ON b.visit_id = r.visit_id"
                           " AND b.resource_no::text = r.resource_id WHERE r.visit_id = ANY(%s)"
                           " ORDER BY 1, b.resource_no", (ids,)).fetchall()
        srv = conn.execute("SELECT visit_id, server, tls, tls_version, h2 FROM model_page_server WHERE visit_id = ANY(%s)"
                           " ORDER BY 1, 2", (ids,)).fetchall()
    pages = {v: {"name": p, "recorded_plt_s": plt, "resources": [], "servers": []} for v, p, plt in visits}
    # the prefetch database: per page (URL requested), in how many of its visits each URL occurs
    page_of = {v: p for v, p, _ in visits}
    n_visits: dict[str, int] = {}
    for p in page_of.values():
        n_visits[p] = n_visits.get(p, 0) + 1
    seen: dict[tuple[str, str], set] = {}
    for v, _, _, _, _, _, url in res:
        seen.setdefault((page_of[v], url), set()).add(v)

    def stable(v: int, url: str) -> bool:
        n = n_visits[page_of[v]]
        return n >= PREFETCH_MIN_VISITS and len(seen[(page_of[v], url)]) >= PREFETCH_MIN_SHARE * n

    for v, rid, par, s, size, red, url in res:
        if v in pages:
            pages[v]["resources"].append({"id": rid, "parent": par, "server": s, "size": size, "redirect": red,
                                          "prefetchable": stable(v, url)})
    for v, s, tls, ver, h2 in srv:
        if v in pages:
            # tls_version NULL: the logger does not record it and no `scan tls` saw the host;
            # the model's default (1.3) applies (analysis/README.md, views section)
            pages[v]["servers"].append({"name": s, "tls": tls, "tls_version": ver or "1.3", "h2": h2})
    if not pages:
        raise UsageError("model_page_visit holds no visits for the selected runs")
    return [_page(p, f"visit {v}") for v, p in pages.items()]


def float_list(text: Optional[str], what: str) -> list[float]:
    if not text:
        return []
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"{what}: {text!r} is not a comma-separated list of numbers") from None
    if not all(math.isfinite(v) for v in values):
        raise UsageError(f"{what}: {text!r} holds a number that is not finite")
    return values
