"""Figures of the browser probes: the tracking table (thesis Tables 3.2, 4.2, 6.1 style) and
the page-load-time CDF of the page-load logger (BLAST)."""
from __future__ import annotations

from netsurvey.errors import UsageError

from .engine import cdf
from .figures import FigureContext, figure


def _tracking_runs(ctx: FigureContext) -> tuple[int, ...]:
    """The selected runs, else the latest finished browser-track run of every browser."""
    if ctx.runs:
        return ctx.run_ids("browser-track")
    with ctx.db.connect() as conn:   # per browser and link profile (issue 25: browser track --profile)
        rows = conn.execute(
            """SELECT max(r.id) FROM scan_run r JOIN browser_track_verdict v ON v.run_id = r.id
               WHERE r.kind = 'browser-track' AND r.status = 'finished'
               GROUP BY v.browser, v.link_profile""").fetchall()
    runs = tuple(sorted(r[0] for r in rows))
    if not runs:
        return ctx.run_ids("browser-track")     # raises the usual "no finished run" error
    ctx.record_runs(runs)
    return runs


def _cell(verdict: str, presented_at, absent_at) -> str:
    if verdict == "viable":
        return f"viable (>= {presented_at:g} s)" if presented_at is not None else "viable"
    if verdict == "blocked" and absent_at is not None:
        return f"blocked ({absent_at:g} s)"
    return verdict


@figure("browser-tracking-table", sources=["browser_track_verdict", "browser_tracking_table"],
        thesis="Tables 3.2, 4.2, 6.1")
def tracking_table(ctx: FigureContext) -> None:
    """The thesis's Tables 3.2 (TFO), 4.2 (TLS) and 6.1 (QUIC) in their shape: rows as in the
    thesis, one column per browser and version (ours: measured lifetimes from
    ``browser lifetime``, verdicts from ``browser track``, n/a with the reason) beside the
    thesis's Chrome / Firefox columns (NAME-3_2/-4_2/-6_1 PNG, NAME-thesis.csv). NAME.csv /
    NAME.png keep every verdict: per experiment and mechanism viable (with the longest wait
    at which the identifier was still presented, s) or blocked (with the shortest wait at
    which it was not), n/a if the browser lacks it."""
    try:
        runs = _tracking_runs(ctx)
    except UsageError:
        if not _latest_lifetimes(ctx):     # neither tracking verdicts nor lifetimes
            raise
        runs = ()
    with ctx.db.connect() as conn:
        rows = conn.execute(
            """SELECT browser, browser_version, os, experiment, mechanism, longest_presented_wait_s,
                      shortest_absent_wait_s, expected_max_s, verdict, link_profile, link_rtt_ms,
                      measured_rtt_median_ms, measured_rtt_connections
               FROM browser_tracking_table WHERE run_id = ANY(%s)
               ORDER BY browser, link_profile NULLS FIRST, experiment, mechanism""", (list(runs),)).fetchall()
    header = ["browser", "version", "os", "experiment", "mechanism", "longest_presented_wait_s",
              "shortest_absent_wait_s", "server_lifetime_s", "verdict", "link_profile", "link_rtt_ms",
              "measured_rtt_median_ms", "measured_rtt_connections"]
    ctx.write_csv(header, rows)
    ctx.sample(len(rows), "verdicts")
    import matplotlib.pyplot as plt

    def col(r) -> tuple:
        return (r[0], r[1] or "?", r[2] or "", link_label(r[9], r[10], [x[11] for x in rows
                                                                         if x[0] == r[0] and x[9] == r[9]]))
    # per browser: the column without a delay line first, then one per profile
    cols = sorted({col(r) for r in rows}, key=lambda c: (c[0], c[1], c[2], not c[3].startswith("shared"), c[3]))
    keys = sorted({(r[3], r[4]) for r in rows})
    life = {(r[3], r[4]): r[7] for r in rows}
    cell = {(col(r), r[3], r[4]): _cell(r[8], r[5], r[6]) for r in rows}
    table = [[e, m, "-" if life.get((e, m)) is None else f"{life[(e, m)]:g}"]
             + [cell.get((c, e, m), "") for c in cols] for e, m in keys]
    fig, ax = plt.subplots(figsize=(3.5 + 2.2 * max(1, len(cols)), 0.6 + 0.28 * max(1, len(table))))
    ax.axis("off")
    if table:
        t = ax.table(cellText=table, colLabels=["experiment", "mechanism", "server lifetime [s]"]
                     + [f"{b} {v}\n{lk}" for b, v, _, lk in cols], loc="center", cellLoc="left")
        t.auto_set_font_size(False)
        t.set_fontsize(7)
        t.auto_set_column_width(list(range(3 + len(cols))))
        for j in range(3 + len(cols)):   # two-line headers (browser, then its link)
            t[0, j].set_height(t[0, j].get_height() * 2)
    oses = sorted({c[2] for c in cols})
    ax.set_title("Tracking via TLS / QUIC / TFO state; OS: " + "; ".join(oses)
                 + "\nlink: the delay line's profile and the TCP round trip the servers measured", fontsize=8)
    ctx.save(fig)
    plt.close(fig)
    # the thesis's tables: per browser the verdicts without a delay line when there are any
    # (the thesis measured without added delay), else those under a profile (labelled there)
    plain = {r[0] for r in rows if r[9] is None}
    _thesis_tables(ctx, [r for r in rows if r[9] is None or r[0] not in plain])


def link_label(profile, rtt_ms, measured_ms: list) -> str:
    """Which delay a tracking column's observations had: no delay line, or the delay line's
    profile with its RTT and the range of the experiments' median server-side RTTs."""
    got = [m for m in measured_ms if m is not None]
    seen = (f"servers saw {min(got):.1f} ms" if len(set(round(m, 1) for m in got)) <= 1
            else f"servers saw {min(got):.1f}-{max(got):.1f} ms") if got else "no TCP RTT observed"
    if profile is None:
        return f"shared vantage, no delay line ({seen})"
    return f"{profile} ({rtt_ms or 0:g} ms RTT; {seen})"


# The thesis's values for the engines it shares with us (Sy 2019, /work/shared/seeds/
# 004_3801537972db3902.txt): Table 3.2 (TFO; Chrome v68 and Firefox v61 on Ubuntu 18.04),
# Table 4.2 (TLS session resumption; desktop Chrome v66.0 and Firefox v59.0; "Our measurement
# period is limited to 24 hours", sec. 4.5.2), Table 6.1 (QUIC; desktop Chrome and Chromium;
# token lifetime "lower boundary", measured up to 11 days; no Firefox: it had no QUIC then).
THESIS = {
    "Table 3.2": {"Chrome v68 (thesis)": {"TFO status": "support (experimental flag)", "TFO tracking period": "unrestricted",
                                          "TFO third-parties": "viable", "TFO virtual hosts": "viable",
                                          "TFO IP address changes": "blocked", "TFO private mode": "viable",
                                          "TFO user applications": "viable", "TFO browser restarts": "viable"},
                  "Firefox v61 (thesis)": {"TFO status": "support (experimental pref)", "TFO tracking period": "unrestricted",
                                           "TFO third-parties": "viable", "TFO virtual hosts": "viable",
                                           "TFO IP address changes": "blocked", "TFO private mode": "viable",
                                           "TFO user applications": "viable", "TFO browser restarts": "viable"}},
    "Table 4.2": {"Chrome v66.0 (thesis)": {"Lifetime for Sess. ID": "60 min", "Lifetime for Sess. Ticket": "30 min",
                                            "Lifetime for TLS 1.3 PSK": "not measured (TLS 1.3 not yet deployed)",
                                            "Third-party tracking": "viable"},
                  "Firefox v59.0 (thesis)": {"Lifetime for Sess. ID": "1 day", "Lifetime for Sess. Ticket": "1 day",
                                             "Lifetime for TLS 1.3 PSK": "not measured (TLS 1.3 not yet deployed)",
                                             "Third-party tracking": "viable"}},
    "Table 6.1": {"Chrome desktop (thesis)": {"Lower boundary of token lifetime": "11 days", "Honors STTL / ticket lifetime": "no (gQUIC STTL)",
                                              "Third-party tracking": "viable"},
                  "Chromium (thesis)": {"Lower boundary of token lifetime": "11 days", "Honors STTL / ticket lifetime": "no (gQUIC STTL)",
                                        "Third-party tracking": "viable"}},
}
ROWS = {
    # thesis lines 758-764: Status, Tracking periods, then tracking across third-parties,
    # virtual hosts, IP address changes, private browsing modes, user applications, restarts
    "Table 3.2": ["TFO status", "TFO tracking period", "TFO third-parties", "TFO virtual hosts",
                  "TFO IP address changes", "TFO private mode", "TFO user applications", "TFO browser restarts"],
    "Table 4.2": ["Lifetime for Sess. ID", "Lifetime for Sess. Ticket", "Lifetime for TLS 1.3 PSK", "Third-party tracking",
                  "Virtual hosts", "Browser restart", "Private mode", "Honors the server's lifetime hint"],
    "Table 6.1": ["Lower boundary of token lifetime", "QUIC ticket lifetime", "Honors STTL / ticket lifetime",
                  "Third-party tracking"],
}
LIFETIME_ROWS = {("Table 4.2", "Lifetime for Sess. ID"): "tls12-session-id",
                 ("Table 4.2", "Lifetime for Sess. Ticket"): "tls12-ticket",
                 ("Table 4.2", "Lifetime for TLS 1.3 PSK"): "tls13-psk",
                 ("Table 6.1", "Lower boundary of token lifetime"): "quic-token",
                 ("Table 6.1", "QUIC ticket lifetime"): "quic-psk"}
VERDICT_ROWS = {("Table 4.2", "Third-party tracking"): ("third-party", "tls13-psk"),
                ("Table 4.2", "Virtual hosts"): ("vhost", "tls13-psk"),
                ("Table 4.2", "Browser restart"): ("restart", "tls13-psk"),
                ("Table 4.2", "Private mode"): ("private", "tls13-psk"),
                ("Table 4.2", "Honors the server's lifetime hint"): ("hint", "tls13-psk"),
                ("Table 6.1", "Honors STTL / ticket lifetime"): ("quic-hint", "quic-psk"),
                ("Table 3.2", "TFO user applications"): ("cross-app", "tfo-cookie-kernel")}
#: Table 3.2 rows each of which needs a TFO experiment of its own (thesis sec. 3.3.3: revisit
#: after up to ten days, a third party on two sites, two names on one address, a new client
#: address, private mode, a restart). `browser track` runs TFO only across applications
#: (cross-app): a verdict of one of these experiments with mechanism tfo-cookie fills its
#: row, else the row says "not measured" - never the cross-app verdict copied.
TFO_ROWS = {"TFO tracking period": "lifetime", "TFO third-parties": "third-party", "TFO virtual hosts": "vhost",
            "TFO IP address changes": "ip-change", "TFO private mode": "private", "TFO browser restarts": "restart"}
TFO_NOT_MEASURED = "not measured: no such TFO experiment (cross-app only)"


def duration(s) -> str:
    """Seconds as the thesis writes durations: s, min, h, days."""
    if s is None:
        return "-"
    for unit, n in (("days", 86400), ("h", 3600), ("min", 60)):
        if s >= n:
            v = s / n
            return f"{v:.2f} {unit}" if v < 10 else (f"{v:.1f} {unit}" if v < 100 else f"{v:.0f} {unit}")
    return f"{s:.0f} s"


def lifetime_cell(status: str, lo, hi, limit, max_age, detail) -> str:
    """A measured lifetime: the bracket's lower end (the state was presented at that age),
    or at-least / none / n/a, with the server's announced limit when that bounded it."""
    if status == "n/a":
        return f"n/a: {detail}" if detail else "n/a"
    if status == "inconsistent" or (lo is not None and hi is not None and lo > hi):
        if not detail or status != "inconsistent":
            detail = f"presented at {duration(lo)} but not at {duration(hi)}"
        return f"inconsistent: {detail}"
    if status == "never-presented":
        return f"none (not presented at {duration(hi)})"
    if status == "at-least-max" or hi is None:     # (fixed offsets, all presented)
        return f">= {duration(lo)}"
    cell = f"{duration(lo)} (< {duration(hi)})"
    if limit and lo is not None and hi is not None and lo <= limit * 1.01 and limit <= hi * 1.01 + 60:
        narrow = hi - lo <= max(0.02 * lo, 120)
        cell += (f" = server's announced {duration(limit)}" if narrow
                 else f" (server announced {duration(limit)})")
    return cell


def _latest_lifetimes(ctx: FigureContext) -> list[tuple]:
    """Latest browser_lifetime row per (browser, state) over finished browser-lifetime runs
    (the selected ones if --run names any)."""
    out: list[tuple] = []
    with ctx.db.connect() as conn:
        has = conn.execute("SELECT to_regclass('browser_lifetime') IS NOT NULL").fetchone()[0]
        if not has:
            return []
        sel = list(ctx.runs) if ctx.runs else None
        rows = conn.execute(
            """SELECT DISTINCT ON (l.browser, l.state) l.run_id, l.browser, l.browser_version, l.state,
                      l.status, l.longest_presented_age_s, l.shortest_absent_age_s, l.server_limit_s, l.max_age_s,
                      l.detail, l.server_name, l.clock_mover
               FROM browser_lifetime l JOIN scan_run r ON r.id = l.run_id
               WHERE r.status = 'finished' AND (%s::bigint[] IS NULL OR l.run_id = ANY(%s::bigint[]))
                 AND l.server_name <> 'hint.track.test'
               ORDER BY l.browser, l.state, l.run_id DESC""", (sel, sel)).fetchall()
        # every probe of that browser, state and host in any finished run with the same clock
        # mover (libfaketime probes, before migration 0125, are not pooled with clockshift ones):
        # a bracket must hold across repeats, else the result is inconsistent
        out = []
        for r in rows:
            probes = conn.execute(
                """SELECT p.age_s, p.presented FROM browser_lifetime_probe p JOIN scan_run s ON s.id = p.run_id
                   WHERE s.status = 'finished' AND p.browser = %s AND p.state = %s AND p.server_name = %s
                     AND p.clock_mover IS NOT DISTINCT FROM %s
                     AND p.age_s IS NOT NULL AND p.presented IS NOT NULL
                     AND (%s::bigint[] IS NULL OR p.run_id = ANY(%s::bigint[]))""",
                (r[1], r[3], r[10], r[11], sel, sel)).fetchall()
            yes = [a for a, p in probes if p]
            no = [a for a, p in probes if not p]
            r = list(r)
            if yes or no:
                lo, hi = (max(yes) if yes else None), (min(no) if no else None)
                if yes and no:
                    status = "inconsistent" if lo > hi else "measured"
                elif no:
                    status = "never-presented"
                else:
                    status = "at-least-max" if lo >= 0.99 * r[8] else "measured"
                detail = (f"presented at {duration(lo)} but not at {duration(hi)} ({len(probes)} probes, "
                          "all runs)") if status == "inconsistent" else r[9]
                r[4:7], r[9] = [status, lo, hi], detail
            out.append(tuple(r))
    if out:
        ctx.record_runs({r[0] for r in out})
    return out


def _thesis_tables(ctx: FigureContext, verdicts: list) -> None:
    """browser-tracking-table-thesis.csv and one PNG per thesis table: rows as in the thesis,
    one column per browser and version (ours), the thesis's columns for Chrome/Firefox."""
    import matplotlib.pyplot as plt

    life = _latest_lifetimes(ctx)
    ours = sorted({(r[0], r[1] or "?") for r in verdicts} | {(r[1], r[2] or "?") for r in life})
    # one column per browser: the newest version seen
    cols: dict[str, str] = {}
    for b, v in ours:
        cols[b] = v
    vcell = {(r[0], r[3], r[4]): (r[8], r[5], r[6]) for r in verdicts}
    prof = {r[0]: r[9] for r in verdicts if len(r) > 9 and r[9] is not None}   # delay profile of the verdicts
    lcell = {(r[1], r[3]): r for r in life}
    detail = {}
    with ctx.db.connect() as conn:
        if verdicts:
            for b, e, m, d in conn.execute(
                    "SELECT browser, experiment, mechanism, detail FROM browser_track_verdict WHERE run_id = ANY(%s)",
                    (list(ctx.notes.get("runs", [])),)):
                detail[(b, e, m)] = d
    out_rows = []
    for table, rows in ROWS.items():
        thesis_cols = THESIS[table]
        header = ["row"] + [f"{b} {v} (ours{', under ' + prof[b] if prof.get(b) else ''})" for b, v in cols.items()] \
            + list(thesis_cols)
        body = []
        for row in rows:
            cells = []
            for b in cols:
                if (table, row) in LIFETIME_ROWS:
                    r = lcell.get((b, LIFETIME_ROWS[(table, row)]))
                    cells.append("not measured (browser lifetime)" if r is None else
                                 lifetime_cell(r[4], r[5], r[6], r[7], r[8], r[9]))
                elif (table, row) in VERDICT_ROWS:
                    e, m = VERDICT_ROWS[(table, row)]
                    v = vcell.get((b, e, m))
                    if v is None:
                        cells.append(f"not measured (browser track --test {e})")
                    elif v[0] == "n/a":
                        cells.append(f"n/a: {detail.get((b, e, m)) or ''}".rstrip(": "))
                    elif row.startswith("Honors"):
                        cells.append("yes" if v[0] == "blocked" else "no")
                    else:
                        cells.append(v[0])
                elif table == "Table 3.2" and row in TFO_ROWS:
                    v = vcell.get((b, TFO_ROWS[row], "tfo-cookie"))
                    if v is None:
                        cells.append(TFO_NOT_MEASURED)
                    elif v[0] == "n/a":
                        cells.append("n/a: no TFO option in its SYNs")
                    else:
                        cells.append(v[0])
                elif table == "Table 3.2" and row == "TFO status":
                    # whether the browser's SYNs carried TFO at all (cross-app's tfo-cookie verdict)
                    v = vcell.get((b, "cross-app", "tfo-cookie"))
                    if v is None:
                        cells.append("not measured (browser track --test cross-app)")
                    else:
                        cells.append("not supported (no TFO option in its SYNs)" if v[0] == "n/a"
                                     else "TFO option in its SYNs")
                elif row == "Third-party tracking" and table == "Table 6.1":
                    cells.append("n/a: no QUIC third-party experiment yet")
                else:
                    cells.append("-")
            body.append([row] + cells + [thesis_cols[c].get(row, "-") for c in thesis_cols])
        # long form CSV rows: table, row, column, value
        for line in body:
            for h, val in zip(header[1:], line[1:]):
                out_rows.append([table, line[0], h, val, "thesis" if "(thesis)" in h else "ours"])
        fig, ax = plt.subplots(figsize=(2.6 + 2.3 * (len(header) - 1), 0.7 + 0.32 * len(body)))
        ax.axis("off")
        short = [[c if len(c) <= 70 else c[:67] + "..." for c in line] for line in body]   # full text: CSV
        t = ax.table(cellText=short, colLabels=header, loc="center", cellLoc="left")
        t.auto_set_font_size(False)
        t.set_fontsize(6.5)
        t.auto_set_column_width(list(range(len(header))))
        ax.set_title(f"{table} (Sy 2019) shape: ours beside the thesis's Chrome / Firefox values", fontsize=8)
        ctx.save(fig, "-" + table.split()[-1].replace(".", "_"))
        plt.close(fig)
    ctx.write_csv(["table", "row", "column", "value", "source"], [r for r in out_rows if r], suffix="-thesis")
    for (b, st), r in sorted(lcell.items()):
        ctx.compare(f"{b} {st} lifetime (own)", None, r[5], "s")


@figure("browser-plt-cdf", sources=["browser_visit"], thesis="BLAST page-load-time metric (no figure counterpart)")
def plt_cdf(ctx: FigureContext) -> None:
    """CDF of the page load time (95% of resources, ms) of complete visits."""
    runs = ctx.run_ids("browser-pageload")
    src = ("SELECT browser AS grp, page_load_time_ms AS value FROM browser_visit "
           "WHERE run_id = ANY(%s) AND status = 'complete'")
    cdfs = cdf(ctx.db, src, (list(runs),))
    ctx.cdf_figure(cdfs, "page load time (95% of resources) [ms]", "share of visits",
                   ["browser", "page_load_time_ms", "cdf"])
