"""CLI: ``netsurvey browser pageload`` (BLAST page-load logger) and ``netsurvey browser
track`` (tracking-period probes). Run them inside the testbed's vantage namespace
(``netsurvey testbed exec -- netsurvey browser ...``)."""
from __future__ import annotations

import ipaddress
import socket
import sys
from pathlib import Path
from typing import Any, List, Mapping, Optional
from urllib.parse import urlsplit

import typer

from netsurvey.errors import UsageError
from netsurvey.measure import measurement
from netsurvey.options import check_targets, list_option, top_option
from netsurvey.runctx import json_output

from . import promises

TLS_TESTS = ("lifetime", "hint", "third-party", "restart", "private", "vhost")
QUIC_TESTS = ("quic-lifetime", "quic-hint")
TESTS = TLS_TESTS + QUIC_TESTS + ("cross-app",)


def _check_browser(name: str) -> None:
    from .drivers import BROWSERS

    if name not in BROWSERS:
        raise UsageError(f"--browser must be one of {', '.join(BROWSERS)}, not {name!r}")


def _allowed_urls(urls: list[str], policy) -> list[str]:
    """Every URL's host must resolve and be allowed by the etiquette policy (else UsageError)."""
    for u in urls:
        parts = urlsplit(u)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(f"--url: {u!r} is not an http(s) URL")
        host = parts.hostname
        try:
            addr = str(ipaddress.ip_address(host))
        except ValueError:
            try:
                addr = socket.getaddrinfo(host, None, socket.AF_INET)[0][4][0]
            except OSError:
                raise UsageError(f"--url: cannot resolve {host!r}") from None
        why = policy.reason_blocked(addr)
        if why:
            raise UsageError(f"--url: {u} ({addr}) is blocked: {why}")
    return urls


def register(app: typer.Typer, scan_app: typer.Typer) -> None:
    browser_app = typer.Typer(no_args_is_help=True, help="Real browsers: page-load logger and tracking probes.")
    app.add_typer(browser_app, name="browser")

    @measurement(browser_app, "browser-pageload", command="pageload", tables=("browser_visit", "browser_resource"), promise=promises.PAGELOAD,
                 render_text=_pageload_text)
    def pageload(
        list_name: Optional[str] = list_option(help="Target list: visits https://HOSTNAME/."),
        top: Optional[int] = top_option(help="Only the first N targets of the list."),
        url: List[str] = typer.Option([], "--url", help="Extra URL to visit (repeatable)."),
        browsers: int = typer.Option(2, "--browsers", help="Parallel browser instances."),
        browser: str = typer.Option("chromium", "--browser", help="chromium, firefox or webkit."),
        page_timeout: float = typer.Option(15.0, "--page-timeout", help="Page-load timeout per visit [s]."),
        profile_root: Optional[Path] = typer.Option(None, "--profile-root", help="Directory for fresh profiles."),
    ) -> dict:
        """Visit pages with parallel real browsers and log every resource (BLAST)."""
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        from netsurvey.clictx import list_db, migrated_db, open_scan, state
        from netsurvey.etiquette import TargetPolicy
        from netsurvey.selection import TargetSelection

        from .pageload import PageLoadOptions, run_pageload
        from .store import VisitStore

        _check_browser(browser)
        if browsers < 1 or browsers > 16:
            raise UsageError("--browsers must be between 1 and 16")
        if page_timeout <= 0:
            raise UsageError("--page-timeout must be positive")
        check_targets(list_name, top, url, what="--url URL")
        db = list_db() if list_name else migrated_db()
        policy = TargetPolicy.from_config(state.config.etiquette)
        from netsurvey.resolve import system_resolver

        system_resolver()   # the browser and the checks below resolve through resolv.conf's resolver
        listed = [f"https://{t.hostname}/" for t in TargetSelection(list_name, top).items(None, required=False)]
        from . import pages as page_policy

        pages = page_policy.judge(listed, policy)
        for p in pages:  # a list's blocked (or unresolvable) host is skipped, never visited; the others are
            if not p.visit:
                Console(stderr=True).print(page_policy.skipped_line(p), highlight=False, markup=False, soft_wrap=True)
        urls = [p.url for p in pages if p.visit]
        urls += _allowed_urls(list(url), policy)  # an explicit --url that is blocked is an error
        _check_browser_contained(policy)
        link, link_ns = _timing_link()
        ctx = open_scan({"list": list_name, "top": top, "urls": list(url), "browsers": browsers,
                                             "browser": browser, "page_timeout_s": page_timeout, **link},
                        **({"namespace": link_ns} if link_ns else {}),
                        packages=("selenium",), targets=page_policy.plan(pages, urls), concurrency=browsers)
        store = VisitStore(db, ctx.run.id)
        err = Console(stderr=True)
        try:
            with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                          TimeElapsedColumn(), console=err, transient=True, disable=json_output()) as prog:
                task = prog.add_task(f"{browser} page loads", total=len(urls))
                counts = run_pageload(urls, PageLoadOptions(browser=browser, browsers=browsers,
                                                            page_timeout_s=page_timeout, profile_root=profile_root),
                                      store, progress=lambda: prog.advance(task))
        finally:
            store.close()
        counts.update(page_policy.counts(pages))
        ctx.counts.update(counts)
        return {"run_id": ctx.run.id, "visits": len(urls), **counts}

    @measurement(browser_app, "browser-track", command="track", tables=("browser_track_verdict",), promise=promises.TRACK,
                 render_text=_track_text)
    def track(
        browser: str = typer.Option("chromium", "--browser", help="chromium, firefox or webkit."),
        test: List[str] = typer.Option(..., "--test", help=f"Experiment: {', '.join(TESTS)} or all (repeatable)."),
        wait: List[float] = typer.Option([6.0], "--wait", help="Seconds between the contexts (repeatable; "
                                         "> the servers' 5 s keep-alive so connections are new)."),
        profile: Optional[str] = typer.Option(None, "--profile", help="Run behind the tracking vantage's delay "
                                              "line with this link profile ([[profile]] of config/testbed.toml, "
                                              "e.g. lte, cable; none = through the line without delay)."),
    ) -> dict:
        """Tracking-period probes: does the browser present an earlier context's TLS state?"""
        from netsurvey.clictx import open_scan

        from .quic_tracking import quic_experiments, run_quic_experiment
        from .tfo_tracking import run_cross_app, tfo_addresses
        from .tracking import ObserverProcess, experiments, os_description, run_experiment

        _check_browser(browser)
        names = list(TESTS) if "all" in test else list(dict.fromkeys(test))
        bad = [t for t in names if t not in TESTS]
        if bad:
            raise UsageError(f"--test: unknown experiment {bad[0]!r} (use {', '.join(TESTS)} or all)")
        if any(not w >= 0 or w == float("inf") for w in wait):
            raise UsageError("--wait must be a finite number of seconds, not negative")
        wait = list(dict.fromkeys(wait))   # a wait given twice is measured once (rows are keyed by it)
        from netsurvey import runctx

        if profile is not None and runctx.current_shard() is not None:
            raise UsageError("--profile runs inline only (one delay line: no --shards / --procs)")
        if profile is not None and not runctx.is_dry_run():   # run again in the tracking vantage, under it
            raise typer.Exit(_track_behind_line(profile, browser, names, wait, json_output()))
        truth = _ground_truth()
        exps = experiments(truth)
        qexps = quic_experiments(truth)
        link, link_ns = _track_link()
        if profile is not None:   # a dry run: the profile it would run under (nothing is brought up)
            _check_profile(profile)
            link = {"link_profile": profile}
        ctx = open_scan({"browser": browser, "tests": names, "waits_s": list(wait), **link},
                        **({"namespace": link_ns} if link_ns else {}), packages=("selenium",))
        watch = {p.address for n in names if n in exps for p in exps[n].probes}
        if "cross-app" in names:
            watch |= tfo_addresses(truth)
        # behind the delay line the browser has addresses of its own: other scanners of the
        # shared vantage (198.18.0.1) never pass for it, whatever their ClientHello looks like
        obs = ObserverProcess(watch, clients=_track_addresses() if link_ns else None) if watch else None
        conn = ctx.db.connect()
        osd = os_description()
        verdicts = []
        try:
            for n in names:
                for w in sorted(wait):
                    def store_conns(step: str, recs: list[dict], _n=n) -> None:
                        _store_connections(conn, ctx.run.id, _n, step, recs, browser)

                    def store_quic(step: str, events: list[dict], _n=n) -> None:
                        _store_quic(conn, ctx.run.id, _n, step, events, browser)
                    if n in exps:
                        vs, version = run_experiment(exps[n], browser, w, obs, store_conns)
                    elif n in qexps:
                        vs, version = run_quic_experiment(n, qexps[n], browser, w, store_quic)
                    else:
                        vs, version = run_cross_app(browser, obs, tfo_addresses(truth), truth.get("ca_file"),
                                                    store_conns, wait_s=w)
                    with conn.transaction():
                        for v in vs:
                            conn.execute(
                                "INSERT INTO browser_track_verdict (run_id, browser, browser_version, os, experiment,"
                                " mechanism, wait_s, expected_max_s, presented, accepted, verdict, detail,"
                                " link_profile, link_rtt_ms)"
                                " VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                                (ctx.run.id, browser, version, osd, v.experiment, v.mechanism, v.wait_s,
                                 v.expected_max_s, v.presented, v.accepted, v.verdict, v.detail,
                                 link.get("link_profile"), link.get("link_rtt_ms")))
                    verdicts += [(version, v) for v in vs]
                    if not json_output():
                        for v in vs:
                            print(f"{n:12s} {v.mechanism:15s} wait {w:g} s: {v.verdict} ({v.detail})", file=sys.stderr)
        finally:
            if obs is not None:
                obs.close()
            conn.close()
        if link and _track_link()[0].get("link_profile") != link["link_profile"]:
            ctx.counts["error"] = "the tracking vantage's profile changed during the run"
            raise UsageError("the tracking vantage's link profile changed during the run (another "
                             "`browser track --profile` at the same time?): run failed")
        ctx.counts.update({"verdicts": len(verdicts), "viable": sum(v.verdict == "viable" for _, v in verdicts)})
        return {"run_id": ctx.run.id, **link, "verdicts": [
            dict(browser=browser, version=ver, experiment=v.experiment, mechanism=v.mechanism, wait_s=v.wait_s,
                 presented=v.presented, accepted=v.accepted, verdict=v.verdict, detail=v.detail)
            for ver, v in verdicts]}


    @measurement(browser_app, "browser-lifetime", command="lifetime",
                 tables=("browser_lifetime_probe", "browser_lifetime"), promise=promises.LIFETIME,
                 render_text=_lifetime_text)
    def lifetime(
        browser: List[str] = typer.Option(["chromium"], "--browser", help="chromium, firefox or webkit (repeatable)."),
        state_: List[str] = typer.Option(["all"], "--state", help="tls12-session-id, tls12-ticket, tls13-psk, "
                                         "quic-token, quic-psk or all (repeatable)."),
        max_age_days: float = typer.Option(30.0, "--max-age-days", help="Largest age tried [days]."),
        resolution_pct: float = typer.Option(1.0, "--resolution-pct", help="Stop when the bracket is within "
                                             "this share of the age [%] ..."),
        resolution_s: float = typer.Option(60.0, "--resolution-s", help="... or within this many seconds."),
        offset: List[float] = typer.Option([], "--offset", help="Instead of bisecting: probe at these clock "
                                           "offsets [s] only (repeatable)."),
        short: bool = typer.Option(False, "--short", help="Probe the short-lived host (hint.track.test, 4 s) "
                                   "instead of the never-expiring one (tls13-psk only): a known answer."),
    ) -> dict:
        """The browser's own lifetime of TLS / QUIC state: its clock moved forward (clockshift.c)."""
        from netsurvey.clictx import open_scan

        from .lifetime import STATES, run_lifetime

        browser = list(dict.fromkeys(browser))   # named twice: once (twice collided on browser_lifetime's key)
        for b in browser:
            _check_browser(b)
        states = list(STATES) if "all" in state_ else list(dict.fromkeys(state_))
        bad = [s_ for s_ in states if s_ not in STATES]
        if bad:
            raise UsageError(f"--state: unknown state {bad[0]!r} (use {', '.join(STATES)} or all)")
        if not 0 < max_age_days <= 3650:
            raise UsageError("--max-age-days must be in (0, 3650]")
        if resolution_pct <= 0 or resolution_s <= 0:
            raise UsageError("--resolution-pct and --resolution-s must be positive")
        if any(o < 0 or o > max_age_days * 86400 for o in offset):
            raise UsageError("--offset must be between 0 and --max-age-days")
        if short and states != ["tls13-psk"]:
            raise UsageError("--short works with --state tls13-psk only")
        truth = _ground_truth()
        ctx = open_scan({"browsers": list(browser), "states": states, "max_age_days": max_age_days,
                                              "resolution_pct": resolution_pct, "resolution_s": resolution_s,
                                              "offsets_s": list(offset), "short": short},
                        packages=("selenium",))
        results = run_lifetime(ctx.db, ctx.run.id, truth, list(browser), states, max_age_days * 86400,
                               resolution_pct / 100, resolution_s, list(offset), short,
                               log=lambda m: print(m, file=sys.stderr, flush=True))
        ctx.counts.update({"results": len(results), "probes": sum(r["probes"] for r in results)})
        return {"run_id": ctx.run.id, "results": results}


    @measurement(browser_app, "browser-revisit", command="revisit", tables=("browser_revisit_visit",), promise=promises.REVISIT,
                 render_text=_revisit_text)
    def revisit(
        browser: List[str] = typer.Option(["chromium"], "--browser", help="chromium, firefox or webkit (repeatable)."),
        transport: List[str] = typer.Option(["tls12", "tls13", "quic"], "--transport",
                                            help="tls12, tls13 or quic (repeatable)."),
        repeat: int = typer.Option(5, "--repeat", min=1, help="First/revisit pairs per browser and transport."),
    ) -> dict:
        """The time a browser saves on a revisit with state, on the timing testbed (run it there:
        netsurvey testbed timing exec -- netsurvey browser revisit ...)."""
        from netsurvey.clictx import open_scan
        from netsurvey.writer import ResultWriter

        from .revisit import TRANSPORTS, VisitTiming, measure_revisits

        # a browser or transport named twice is measured once (twice collided on the table's key)
        browser, transport = list(dict.fromkeys(browser)), list(dict.fromkeys(transport))
        for b in browser:
            _check_browser(b)
        bad = [t for t in transport if t not in TRANSPORTS]
        if bad:
            raise UsageError(f"--transport: unknown {bad[0]!r} (use {', '.join(TRANSPORTS)})")
        if not 1 <= repeat <= 1000:
            raise UsageError("--repeat must be between 1 and 1000")
        server, applied = _timing_server()
        policy = _policy()
        _check_browser_contained(policy)
        for addr in server["addresses"]:
            why = policy.reason_blocked(addr)
            if why:
                raise UsageError(f"the timing server {addr} is blocked: {why}")
        link = {"link_profile": (applied or {}).get("name"), "link_rtt_ms": (applied or {}).get("rtt_ms")}
        ctx = open_scan({"browsers": list(browser), "transports": list(transport), "repeat": repeat,
                                             "server": server["hostname"], **link},
                        packages=("selenium",), namespace=server["vantage_netns"], targets=server["addresses"])
        cols = [f for f in VisitTiming.__dataclass_fields__] + ["link_profile", "link_rtt_ms"]
        with ResultWriter(ctx.db, "browser_revisit_visit", ["run_id", *cols]) as w:
            measure_revisits(server["revisit"], list(browser), list(transport), repeat,
                             lambda v: w.write((ctx.run.id, *(getattr(v, c) for c in cols[:-2]),
                                                link["link_profile"], link["link_rtt_ms"])),
                             log=lambda m: print(m, file=sys.stderr, flush=True))
        with ctx.db.connect() as conn:
            rows = conn.execute("SELECT browser, transport, pairs, revisits_resumed, revisits_early_data, "
                                "first_ttfb_median_ms, revisit_ttfb_median_ms, saving_median_ms, saving_median_rtts "
                                "FROM browser_revisit_saving WHERE run_id = %s ORDER BY browser, transport",
                                (ctx.run.id,)).fetchall()
        ctx.counts.update({"pairs": sum(r[2] for r in rows)})
        keys = ("browser", "transport", "pairs", "revisits_resumed", "revisits_early_data", "first_ttfb_median_ms",
                "revisit_ttfb_median_ms", "saving_median_ms", "saving_median_rtts")
        return {"run_id": ctx.run.id, **link, "savings": [dict(zip(keys, r)) for r in rows]}


def _pageload_text(res: Mapping[str, Any]) -> str:
    return (f"run {res['run_id']}: {res['visits']} visits, {res['complete']} complete, "
            f"{res['incomplete']} incomplete, {res['restarts']} browser restarts")


def _track_text(res: Mapping[str, Any]) -> str:
    verdicts = res["verdicts"]
    return f"run {res['run_id']}: {len(verdicts)} verdicts ({sum(v['verdict'] == 'viable' for v in verdicts)} viable)"


def _lifetime_text(res: Mapping[str, Any]) -> str:
    lines = [f"{r['browser']:8s} {r['state']:16s} {r['status']:15s} presented up to "
             f"{_age(r['longest_presented_age_s'])}, not at {_age(r['shortest_absent_age_s'])} "
             f"({r['probes']} probes)" for r in res["results"]]
    return "\n".join([*lines, f"run {res['run_id']}: {len(res['results'])} lifetimes"])


def _revisit_text(res: Mapping[str, Any]) -> str:
    lines = [f"{r['browser']:8s} {r['transport']:6s} {r['pairs']} pairs, resumed {r['revisits_resumed']}, "
             f"early data {r['revisits_early_data']}: first {r['first_ttfb_median_ms']:.1f} ms, "
             f"revisit {r['revisit_ttfb_median_ms']:.1f} ms, saved {r['saving_median_ms']:.1f} ms"
             + (f" ({r['saving_median_rtts']:.2f} RTT)" if r["saving_median_rtts"] is not None else "")
             for r in res["savings"]]
    return "\n".join([*lines, f"run {res['run_id']}: link profile {res['link_profile']} ({res['link_rtt_ms']} ms RTT)"])


def _track_link() -> tuple[dict, Optional[str]]:
    """The tracking vantage's link profile (name, RTT, ...) as its delay line reports it and its
    namespace, when this runs there (``browser track --profile P`` re-runs itself there); else
    ({}, None): the shared vantage, no delay line."""
    from testbed import trackline

    cfg = _testbed_cfg()
    if not trackline.in_track_vantage(cfg):
        return {}, None
    a = trackline.delay_line_applied() or {}
    return ({"link_profile": a.get("name"), "link_rtt_ms": a.get("rtt_ms"), "link_jitter_ms": a.get("jitter_ms"),
             "link_loss_pct": a.get("loss_pct"), "link_rate_kbit": a.get("rate_kbit")}, trackline.netns_name(cfg))


def _testbed_cfg():
    """The running testbed's config (it may be another checkout's), else this checkout's."""
    from testbed.manager import State
    from testbed.model import DEFAULT_TESTBED_CONFIG, load_testbed_config

    st = State.load()
    return load_testbed_config(Path(st.config_path) if st and st.config_path else DEFAULT_TESTBED_CONFIG)


def _track_addresses() -> set[str]:
    t = _testbed_cfg().timing
    return {t.track_v4, str(ipaddress.ip_address(t.track_v6))}


def _check_profile(profile: str):
    """The testbed config if ``profile`` is one of its [[profile]]s, else UsageError."""
    cfg = _testbed_cfg()
    known = [p.name for p in cfg.profiles]
    if profile not in known:
        raise UsageError(f"--profile: no such profile {profile!r} (known: {', '.join(known)})")
    return cfg


def _track_behind_line(profile: str, browser: str, names: list[str], wait: list[float], as_json: bool) -> int:
    """``browser track --profile P``: bring up the tracking vantage (testbed/trackline.py), switch
    its delay line to P, run ``browser track`` there (same arguments), switch back to 'none'.
    Returns the inner command's exit code; its output passes through."""
    import os
    import subprocess

    from testbed import trackline
    from testbed.manager import State
    from testbed.model import ProfileError
    from testbed.profiles import TRACK, apply

    cfg = _check_profile(profile)
    st = State.load()
    if not st or not st.complete:
        raise UsageError("the testbed is not up ('netsurvey testbed up')")
    if trackline.in_track_vantage(cfg):
        raise UsageError("--profile: already in the tracking vantage (run browser track without --profile here)")
    if os.geteuid() != 0:
        raise UsageError("--profile needs root (the tracking vantage's namespace and delay line)")
    try:
        trackline.up(cfg, log=lambda m: print(m, file=sys.stderr, flush=True))
        apply(cfg, profile, [TRACK])
    except (ProfileError, RuntimeError) as exc:
        raise UsageError(f"--profile {profile}: {exc}") from None
    import netsurvey

    repo = Path(netsurvey.__file__).resolve().parent.parent
    from netsurvey.clictx import state

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(repo), *filter(None, [env.get("PYTHONPATH")])])
    if state.dsn:   # the global options, for the command run again
        env["NETSURVEY_DSN"] = state.dsn
    if state.config_path:
        env["NETSURVEY_CONFIG"] = str(Path(state.config_path).resolve())
    argv = ["ip", "netns", "exec", trackline.netns_name(cfg), sys.executable, "-m", "netsurvey.cli", "browser",
            "track", "--browser", browser, *[a for n in names for a in ("--test", n)],
            *[a for w in wait for a in ("--wait", repr(w))], *(["--json"] if as_json else [])]
    try:
        return subprocess.run(argv, env=env).returncode
    finally:
        try:
            apply(cfg, "none", [TRACK])
        except (ProfileError, RuntimeError) as exc:
            print(f"browser track: could not switch the tracking vantage back to none: {exc}", file=sys.stderr)


def _policy():
    from netsurvey.clictx import state
    from netsurvey.etiquette import TargetPolicy

    return TargetPolicy.from_config(state.config.etiquette)


def _check_browser_contained(policy) -> None:
    """A browser fetches whatever a page names (third parties, subresources), past the
    etiquette policy: it runs only where no allowed testbed network takes the default route."""
    leaving = policy.testbed_off_machine()
    if leaving:
        raise UsageError(f"a browser goes wherever pages point it, and this namespace sends (part of) "
                         f"{', '.join(map(str, leaving))} through its default gateway, off the machine: "
                         "run inside the testbed (netsurvey testbed exec -- ...)")


def _timing_link() -> tuple[dict, Optional[str]]:
    """The timing testbed's link profile (name, RTT, rate) and vantage namespace when this
    runs in its vantage (`netsurvey testbed timing exec -- ...`), else ({}, None): page loads
    under delay record the profile they ran under (issue 25, item 6: blast-validation groups
    by it) and the right vantage."""
    try:
        server, applied = _timing_server()
    except Exception:   # not in the timing vantage, or no timing testbed: no link profile to record
        return {}, None
    a = applied or {}
    return ({"link_profile": a.get("name"), "link_rtt_ms": a.get("rtt_ms"), "link_rate_kbit": a.get("rate_kbit")},
            server["vantage_netns"])


def _timing_server() -> tuple[dict, Optional[dict]]:
    """The timing testbed's server, checked to be up and reachable from here (the command
    must run in the timing vantage: `netsurvey testbed timing exec -- ...`)."""
    from testbed import timing
    from testbed.manager import State
    from testbed.model import DEFAULT_TESTBED_CONFIG, load_testbed_config

    from .revisit import RevisitServer

    st = State.load()
    cfg = load_testbed_config(Path(st.config_path) if st and st.config_path else DEFAULT_TESTBED_CONFIG)
    s = timing.status(cfg)
    if not s["up"]:
        raise UsageError("the timing testbed is not up ('netsurvey testbed timing up')")
    try:
        with socket.socket() as probe:   # bind only: no packet leaves
            probe.bind((cfg.timing.vantage_v4, 0))
    except OSError:
        raise UsageError("run this in the timing vantage: netsurvey testbed timing exec -- "
                         "netsurvey browser revisit ...") from None
    server = RevisitServer(hostname=s["hostname"], tls12_port=s["services"]["tls12_only_port"],
                           nginx_log=Path(s["nginx_access_log"]), quic_log=Path(s["quic_log"]),
                           quic_certfile=Path(s["certfile"]))
    return ({"hostname": s["hostname"], "addresses": [s["server_v4"], s["server_v6"]],
             "vantage_netns": s["vantage_netns"], "revisit": server}, s.get("delay_line"))


def _age(s: Optional[float]) -> str:
    if s is None:
        return "-"
    for unit, n in (("d", 86400), ("h", 3600), ("min", 60)):
        if s >= n:
            return f"{s / n:.2f} {unit}"
    return f"{s:.1f} s"


def _ground_truth() -> dict:
    from testbed.manager import State, Testbed
    from testbed.model import DEFAULT_TESTBED_CONFIG, load_testbed_config

    st = State.load()
    if not st or not st.complete:
        raise UsageError("the testbed is not up ('netsurvey testbed up')")
    path = Path(st.config_path) if st.config_path else DEFAULT_TESTBED_CONFIG
    truth = Testbed(load_testbed_config(path), path).ground_truth(st)
    _check_truth_reachable(truth)
    return truth


def _check_truth_reachable(truth: dict) -> None:
    """The testbed servers a browser is sent to must be contactable from here: allowed and
    not behind this namespace's default route (outside the testbed's namespaces their
    addresses lead off the machine: the session-31 adversary saw 'browser track' connect
    over the default route), and the resolver the browser asks must be on the machine too."""
    from netsurvey.etiquette import explain
    from netsurvey.resolve import system_resolver

    policy = _policy()
    _check_browser_contained(policy)
    for h in [*truth.get("tls_hosts", ()), *truth.get("quic_hosts", ())]:
        for addr in h.get("addresses", ()):
            why = policy.reason_blocked(addr)
            if why:
                raise UsageError(f"the testbed's {h.get('hostname')} ({addr}): {explain(why)}")
    system_resolver()


def _hex(x):
    return None if x is None or x == "" else bytes.fromhex(x)


def _store_quic(conn, run_id: int, experiment: str, step: str, events: list[dict], app: str) -> None:
    """One row per QUIC handshake ('connection' event), with what the server issued on it."""
    import datetime as dt

    tokens = {e["client_port"]: e["token"] for e in events if e["event"] == "token_issued"}
    tickets = {e["client_port"]: e["ticket_prefix"] for e in events if e["event"] == "ticket_issued"}
    with conn.transaction():
        for e in events:
            if e["event"] != "connection":
                continue
            conn.execute(
                "INSERT INTO browser_track_connection (run_id, experiment, step, observed_at, transport, server_name,"
                " server_address, client_port, client_app, tls13_psk_identity, server_version, server_accepted_psk,"
                " issued_ticket, quic_token, quic_token_status, quic_ticket_status, quic_session_resumed,"
                " quic_early_data_accepted, issued_token)"
                " VALUES (%s,%s,%s,%s,'quic',%s,%s,%s,%s,%s,'1.3',%s,%s,%s,%s,%s,%s,%s,%s)",
                (run_id, experiment, step, dt.datetime.fromtimestamp(e["ts"], dt.timezone.utc), e["host"],
                 e["server_address"], e["client_port"], app, _hex(e.get("ticket_presented")),
                 e.get("session_resumed"), _hex(tickets.get(e["client_port"])), _hex(e.get("token_presented")),
                 e.get("token_status"), e.get("ticket_status"), e.get("session_resumed"),
                 e.get("early_data_accepted"), _hex(tokens.get(e["client_port"]))))


def _store_connections(conn, run_id: int, experiment: str, step: str, recs: list[dict], app: str) -> None:
    import datetime as dt

    def b(x):      # "" stays b"" (an empty TFO option = cookie request, an empty ticket = request)
        return None if x is None else bytes.fromhex(x)

    with conn.transaction():
        for r in recs:
            conn.execute(
                "INSERT INTO browser_track_connection (run_id, experiment, step, observed_at, transport, server_name,"
                " server_address, client_port, tfo_cookie, tls_session_id, tls_ticket, tls13_psk_identities,"
                " tls13_psk_identity, server_version, server_session_id, server_accepted_psk, issued_ticket,"
                " issued_ticket_lifetime_s, client_app, client_fingerprint, issued_tfo_cookie, handshake_rtt_ms)"
                " VALUES (%s,%s,%s,%s,'tcp',%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                (run_id, experiment, step, dt.datetime.fromtimestamp(r["ts"], dt.timezone.utc), r.get("sni"),
                 r["server"], r["client_port"], b(r.get("tfo_cookie")), b(r.get("session_id")), b(r.get("ticket")),
                 r.get("psk_identities"), b(r.get("psk_identity")), r.get("server_version"),
                 b(r.get("server_session_id")), r.get("server_accepted_psk"), b(r.get("issued_ticket")),
                 r.get("issued_ticket_lifetime_s"), r.get("client_app", app), r.get("fingerprint"),
                 b(r.get("issued_tfo_cookie")), r.get("handshake_rtt_ms")))


def demo_steps():
    """This package's demo step (netsurvey/plugins.py)."""
    from . import demo

    return [(70, demo.STEP, demo.run)]
