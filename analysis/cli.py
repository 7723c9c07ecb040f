"""Commands of the analysis package: ``netsurvey simulate MODEL`` (JSON out) and
``netsurvey report --out DIR``. Registered by netsurvey.cli through ``register``."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer

from netsurvey.errors import UsageError
from netsurvey.options import json_option, out_option

simulate_app = typer.Typer(no_args_is_help=True, help="Simulation models (thesis and BLAST); print JSON. "
                           "Each reads --input FILE (formats: analysis/README.md) or the database's model_* views.")

def _input_file(value: Optional[Path]) -> Optional[Path]:
    from netsurvey.inputs import input_file

    return None if value is None else input_file(value)


INPUT = typer.Option(None, "--input", callback=_input_file,
                     help="Input file (see analysis/README.md); default: the database.")
RUNS = typer.Option([], "--run", help="scan_run id(s) to read from the database (default: all rows of the view).")
OUT = out_option(None, "Write the JSON here instead of stdout.")


def _emit(result: dict, out: Optional[Path]) -> None:
    text = json.dumps(result, indent=2, default=str)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n")
    else:
        sys.stdout.write(text + "\n")


def _db():
    from netsurvey.clictx import migrated_db

    return migrated_db()


def _positive(value: float, what: str) -> float:
    if value <= 0:
        raise UsageError(f"{what} must be > 0, got {value}")
    return value


@simulate_app.command("tfo-revisits")
def sim_tfo_revisits(
    input: Optional[Path] = INPUT, runs: list[int] = RUNS, out: Optional[Path] = OUT,
    failure_rate: Optional[str] = typer.Option(None, "--failure-rate",
                                               help="Cookie failure probability per revisit, comma-separated (e.g. 0.393,0.247,0.0956)."),
    rtt_ms: float = typer.Option(60.0, "--rtt", help="Round-trip time [ms] (thesis: 60, LTE)."),
    secondary: int = typer.Option(19, "--secondary-hosts", help="Hosts fetched in parallel after the primary host."),
) -> None:
    """Thesis Table 3.6: TFO/TLS vs TCP FOP/TLS delay saved on revisits under load balancing."""
    from .models import inputs
    from .models.tfo_revisits import RevisitOptions, tfo_revisits

    _positive(rtt_ms, "--rtt")
    if secondary < 0:
        raise UsageError("--secondary-hosts must be >= 0")
    source: dict = {}
    if failure_rate:
        rates = inputs.float_list(failure_rate, "--failure-rate")
        source = {"source": "--failure-rate"}
    elif input:
        rates = inputs.failure_rates_file(input)
        source = {"source": str(input)}
    else:
        rates, run_ids = inputs.failure_rates_db(_db(), tuple(runs))
        source = {"source": "model_tfo_revisit_failure", "runs": run_ids}
    if any(not 0 <= f <= 1 for f in rates):
        raise UsageError("failure rates must be within 0..1")
    if not rates:
        raise UsageError("no failure rates given")
    _emit({**tfo_revisits(rates, RevisitOptions(rtt_ms, secondary)), **source}, out)


def _costs(full_ms, delta_ms, full_cpu, resumed_cpu, rtt_ms, zero_rtt):
    from .models.trust import Costs

    for v, n in ((full_ms, "--full-ms"), (full_cpu, "--full-cpu-ms"), (rtt_ms, "--rtt")):
        _positive(v, n)
    if resumed_cpu < 0 or delta_ms < 0:
        raise UsageError("--resumed-cpu-ms and --delta-ms must be >= 0")
    return Costs(full_ms=full_ms, delta_ms=delta_ms + (rtt_ms if zero_rtt else 0.0), full_cpu_ms=full_cpu,
                 resumed_cpu_ms=resumed_cpu, rtt_ms=rtt_ms)


def _sites(input, trust, runs):
    from .models import inputs

    if trust not in ("san", "resumption", "union"):
        raise UsageError(f"--trust: {trust!r} is not one of san, resumption, union")
    if input:
        return inputs.sites_file(input), {"source": str(input)}
    return inputs.sites_db(_db(), trust, tuple(runs)), {"source": "model_domain_tree_edge/model_trust_pair", "trust": trust}


@simulate_app.command("tls-across-hostnames")
def sim_tls_across(
    input: Optional[Path] = INPUT, runs: list[int] = RUNS, out: Optional[Path] = OUT,
    trust: str = typer.Option("union", "--trust", help="Trust groups from the database: san, resumption or union."),
    full_ms: Optional[float] = typer.Option(None, "--full-ms", help="Delay of a full TLS 1.3 handshake [ms] "
                                            "(default: measured by scan handshake-timing, else thesis Table 5.1: 29.17)."),
    delta_ms: Optional[float] = typer.Option(None, "--delta-ms", help="Delay saved per resumed handshake Δ_1RTT [ms] "
                                             "(default: measured, else thesis eq. 5.3: 22.83)."),
    zero_rtt: bool = typer.Option(False, "--zero-rtt", help="0-RTT resumptions: Δ_0RTT = --delta-ms + --rtt (eq. 5.4)."),
    rtt_ms: Optional[float] = typer.Option(None, "--rtt", help="Round-trip time [ms] (for --zero-rtt; default: the "
                                           "measured run's configured RTT, else 60)."),
    full_cpu: Optional[float] = typer.Option(None, "--full-cpu-ms", help="CPU time per peer of a full handshake [ms] "
                                             "(default: measured, else 8)."),
    resumed_cpu: Optional[float] = typer.Option(None, "--resumed-cpu-ms", help="CPU time per peer of a resumed "
                                                "handshake [ms] (default: measured, else 2)."),
    max_pairs: int = typer.Option(100_000, "--max-pairs", help="Site pairs for the two-site variant (Table 5.6)."),
) -> None:
    """Thesis Tables 5.4-5.6, Fig 5.5, 5.6, eq. 5.5: TLS resumption across hostnames."""
    from .models.trust import tls_across_hostnames

    sites, source = _sites(input, trust, runs)
    given = {"full_ms": full_ms, "delta_ms": delta_ms, "full_cpu_ms": full_cpu, "resumed_cpu_ms": resumed_cpu,
             "rtt_ms": rtt_ms}
    if all(v is not None for v in given.values()):
        base, labels = {}, {}
    else:  # constants not given: the newest handshake-timing run's, else the thesis's (labelled)
        from .models.measured import THESIS_LABELS, measured_costs
        from .models.trust import Costs

        try:
            costs, labels = measured_costs(_db())
        except Exception:  # noqa: BLE001 - with --input the database is optional: thesis values
            if not input:
                raise
            costs, labels = Costs(), dict(THESIS_LABELS)
        base = {k: getattr(costs, k) for k in given}
    vals = {k: (v if v is not None else base[k]) for k, v in given.items()}
    labels = {k: ("command line" if given[k] is not None else labels[k]) for k in given}
    res = tls_across_hostnames(sites, _costs(vals["full_ms"], vals["delta_ms"], vals["full_cpu_ms"],
                                             vals["resumed_cpu_ms"], vals["rtt_ms"], zero_rtt),
                               max_pairs=max_pairs)
    _emit({**res, **source, "constants": {k: {"value_ms": vals[k], "source": labels[k]} for k in given}}, out)


@simulate_app.command("shared-address-validation")
def sim_shared_validation(
    input: Optional[Path] = INPUT, runs: list[int] = RUNS, out: Optional[Path] = OUT,
    trust: str = typer.Option("union", "--trust", help="Validation groups from the database: san, resumption or union."),
    rtt_ms: float = typer.Option(60.0, "--rtt", help="Round-trip time saved per converted handshake [ms]."),
) -> None:
    """Thesis Fig 7.3, 7.4: QUIC initial handshakes with Retry with a shared address validation."""
    from .models.trust import Costs, shared_address_validation

    _positive(rtt_ms, "--rtt")
    sites, source = _sites(input, trust, runs)
    _emit({**shared_address_validation(sites, Costs(rtt_ms=rtt_ms)), **source}, out)


@simulate_app.command("oob-tokens")
def sim_oob(
    input: Optional[Path] = typer.Option(None, "--input", dir_okay=False, callback=_input_file, help="Optional domain trees (JSON) for the mean sequential connections."),
    out: Optional[Path] = OUT,
    t_proc_ms: float = typer.Option(40.0, "--t-proc", help="Handshake processing time [ms] (thesis: 40)."),
    rtt_ms: float = typer.Option(90.0, "--rtt", help="RTT of the web-browsing example [ms] (thesis: 90)."),
    max_rtt: float = typer.Option(300.0, "--max-rtt", help="Largest RTT of the Fig 8.3 table [ms]."),
    sequential: float = typer.Option(4.04, "--sequential-connections", help="Mean longest path of sequential connections (thesis: 4.04)."),
) -> None:
    """Thesis eq. 8.1/8.2, Fig 8.3: out-of-band address-validation tokens."""
    from .models.quic import OobOptions, oob_tokens

    if t_proc_ms < 0 or rtt_ms < 0 or max_rtt <= 0:
        raise UsageError("--t-proc, --rtt must be >= 0 and --max-rtt > 0")
    source = {"source": "options"}
    if input:
        from statistics import mean

        from .models.inputs import sites_file
        from .models.trust import simulate_site

        sequential = mean(simulate_site(s).longest_path_default for s in sites_file(input))
        source = {"source": str(input)}
    grid = tuple(max_rtt * i / 30 for i in range(31))
    _emit({**oob_tokens(OobOptions(t_proc_ms, grid, rtt_ms, sequential)), **source}, out)


@simulate_app.command("quicsocks")
def sim_quicsocks(
    input: Optional[Path] = INPUT, runs: list[int] = RUNS, out: Optional[Path] = OUT,
    rtt_dns: Optional[float] = typer.Option(None, "--rtt-dns", help="RTT client-resolver/proxy [ms] (Table 9.2: 30)."),
    rtt_server: Optional[float] = typer.Option(None, "--rtt-server", help="RTT proxy-server [ms] (Table 9.2: 30)."),
    rtt_direct: Optional[float] = typer.Option(None, "--rtt-direct", help="RTT client-server [ms] (Table 9.2: 60)."),
) -> None:
    """Thesis Tables 9.1, 9.2, Fig 9.7: QuicSocks proxy vs status quo (given RTTs or Atlas triplets)."""
    from .models import inputs
    from .models.quic import RttTriplet, quicsocks

    given = [rtt_dns, rtt_server, rtt_direct]
    if any(v is not None for v in given):
        if any(v is None or v < 0 for v in given):
            raise UsageError("give all of --rtt-dns, --rtt-server, --rtt-direct (ms, >= 0)")
        trip, source = [RttTriplet("given", rtt_dns, rtt_server, rtt_direct)], {"source": "options"}
    elif input:
        trip, source = inputs.triplets_file(input), {"source": str(input)}
    else:
        trip, run_ids = inputs.triplets_db(_db(), tuple(runs))
        source = {"source": "model_rtt_triplet", "runs": run_ids}
    if not trip:
        raise UsageError("no RTT triplets")
    _emit({**quicsocks(trip), **source}, out)


@simulate_app.command("prolongation")
def sim_prolongation(
    input: Optional[Path] = typer.Option(None, "--input", dir_okay=False, callback=_input_file, help="DNS log CSV: user_id,unix_time,hostname (header optional)."),
    out: Optional[Path] = OUT,
    lifetimes: Optional[str] = typer.Option(None, "--lifetimes", help="Comma-separated lifetimes, e.g. 5m,1h,24h,7d (default: 1m..7d)."),
    start: Optional[float] = typer.Option(None, "--sample-start", help="Start of the sample period [unix s] (default: first query)."),
    end: Optional[float] = typer.Option(None, "--sample-end", help="End of the sample period [unix s] (default: last query)."),
) -> None:
    """Thesis Def. 1-4, Fig 4.11-4.13: tracking periods under the prolongation attack (computed in PostgreSQL)."""
    from netsurvey.durations import duration_option_s

    from .models import inputs
    from .models.prolongation import DB_VIEW, ProlongationOptions, drop_table, load_log, prolongation

    opts = ProlongationOptions()
    if lifetimes:
        opts = ProlongationOptions(lifetimes_s=tuple(duration_option_s(x, "--lifetimes") for x in lifetimes.split(",") if x.strip()))
    opts = ProlongationOptions(opts.lifetimes_s, start, end)
    if input is not None and not input.exists():
        raise UsageError(f"{input}: file not found")
    db = _db()
    if input is None:
        inputs.check_views(db, "prolongation")
        _emit({**prolongation(db, DB_VIEW, opts), "source": DB_VIEW}, out)
        return
    table = load_log(db, input)
    try:
        res = prolongation(db, table, opts)
    finally:
        drop_table(db, table)
    _emit({**res, "source": str(input)}, out)


@simulate_app.command("pageload")
def sim_pageload(
    input: Optional[Path] = INPUT, runs: list[int] = RUNS, out: Optional[Path] = OUT,
    rtt: Optional[float] = typer.Option(None, "--rtt", help="Round-trip time [s] (default: the file's rtt_s, else 0.06)."),
    bandwidth: Optional[float] = typer.Option(None, "--bandwidth", help="Per-resource bandwidth [bytes/s] (default: file, else 1e6)."),
    tfo: bool = typer.Option(False, "--tfo", help="TCP Fast Open."),
    zero_rtt: bool = typer.Option(False, "--zero-rtt", help="TLS 0-RTT resumption."),
    across: bool = typer.Option(False, "--across-hostnames", help="Resumption across hostnames of a trust group."),
    redirect_db: bool = typer.Option(False, "--redirect-db", help="Redirect database."),
    prefetch_db: bool = typer.Option(False, "--prefetch-db", help="Prefetch database."),
    h2_db: bool = typer.Option(False, "--h2-db", help="HTTP/2 database."),
    max_per_server: int = typer.Option(6, "--max-per-server", help="Connections per server."),
    optimistic: bool = typer.Option(False, "--optimistic-data", help="Optimistic data (BLAST sec. V-C)."),
    alpn_rtt: bool = typer.Option(False, "--alpn-rtt", help="HTTP/2 one RTT after TLS (Tor Browser 8.5, BLAST sec. IV-B)."),
    pipeline_depth: int = typer.Option(1, "--pipeline-depth", help="HTTP/1.1 pipelining depth (1 = none)."),
) -> None:
    """BLAST sec. V-B: event-driven page-load simulation; correlation with recorded visits."""
    from .models import inputs
    from .models.pageload import Features, PageOptions, pageload

    params: dict = {}
    if input:
        pages, params = inputs.pages_file(input)
        source = {"source": str(input)}
    else:
        pages = inputs.pages_db(_db(), tuple(runs))
        source = {"source": "model_page_visit"}
    r = _positive(rtt if rtt is not None else float(params.get("rtt_s", 0.06)), "--rtt")
    bw = _positive(bandwidth if bandwidth is not None else float(params.get("bandwidth_Bps", 1e6)), "--bandwidth")
    if max_per_server < 1:
        raise UsageError("--max-per-server must be >= 1")
    if not 1 <= pipeline_depth <= 100:
        raise UsageError("--pipeline-depth must be between 1 and 100")
    opts = PageOptions(rtt_s=r, bandwidth_Bps=bw, max_per_server=max_per_server,
                       features=Features(tfo, zero_rtt, across, redirect_db, prefetch_db, h2_db, optimistic, alpn_rtt,
                                         pipeline_depth))
    try:
        res = pageload(pages, opts)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    _emit({**res, **source}, out)


def register(app: typer.Typer, scan_app: typer.Typer) -> None:
    app.add_typer(simulate_app, name="simulate")
    _register_plot(app)

    @app.command("report")
    def report_cmd(
        out_dir: Path = typer.Option(Path("out/report"), "--out", help="Output directory (index.html + figures/)."),
        runs: list[int] = typer.Option([], "--run", help="scan_run id(s) to use (default: the latest per kind)."),
        as_json: bool = json_option(help="Print a JSON summary."),
    ) -> None:
        """Write a self-contained HTML report of every figure and table the database supports."""
        from netsurvey.clictx import migrated_db

        from .report import build_report

        # not the read-only role: the prolongation model writes work tables
        summary = build_report(migrated_db(create=False), out_dir, tuple(runs))
        if as_json:
            print(json.dumps(summary, default=str))
        else:
            print(f"{summary['index']}: {summary['rendered']} figures/tables rendered, "
                  f"{summary['missing']} without data")


def demo_steps():
    """This package's demo step (netsurvey/plugins.py)."""
    from . import demo

    return [(90, demo.STEP, demo.run)]


def _register_plot(app: typer.Typer) -> None:
    import json

    from rich.console import Console
    from rich.table import Table

    from netsurvey.clictx import migrated_db

    out = Console()

    @app.command("plot")
    def plot_cmd(
        name: Optional[str] = typer.Argument(None, help="Figure or table name (see --list)."),
        runs: list[int] = typer.Option([], "--run", help="scan_run id(s) to use (default: the latest run)."),
        out_dir: Path = typer.Option(Path("out/figures"), "--out", help="Output directory."),
        list_: bool = typer.Option(False, "--list", help="List every figure with its source tables."),
        as_json: bool = json_option(help="JSON output."),
    ) -> None:
        """Write a figure (PNG + SVG + CSV) or table (CSV) from the database; never touches the network."""
        from .figures import load_all, render

        if list_ or name is None:
            specs = load_all()
            if as_json:
                print(json.dumps([{"name": s.name, "sources": list(s.sources), "thesis": s.thesis,
                                   "description": s.description} for s in specs.values()]))
                return
            if not sys.stdout.isatty():   # piped: plain TSV, one figure per line, nothing cut
                print("name\tthesis\tsource_tables\twhat")
                for s in specs.values():
                    print("\t".join(" ".join(str(x).split()) for x in
                                    (s.name, s.thesis, ",".join(s.sources), s.description)))
                return
            # a terminal: names are never cut (they are what one types next)
            t = Table(box=None, pad_edge=False)
            t.add_column("name", no_wrap=True, min_width=max(len(s.name) for s in specs.values()))
            t.add_column("thesis", max_width=16, overflow="fold")
            t.add_column("what", overflow="fold")
            for s in specs.values():
                t.add_row(s.name, s.thesis, s.description)
            out.print(t)
            return
        ctx = render(migrated_db(create=False), name, out_dir, runs)
        if as_json:
            print(json.dumps({"name": name, "files": [str(p) for p in ctx.written], "notes": ctx.notes}, default=str))
        else:
            for p in ctx.written:
                out.print(str(p))


