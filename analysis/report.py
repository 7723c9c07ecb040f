"""``netsurvey report --out DIR``: one self-contained HTML page (images inlined as data
URIs) with every registered figure and table the database supports. Each section gives the
command that rebuilds it, the scan_run ids, the sample sizes and the thesis's published
value beside ours; a figure without data says so (with the reason) instead of vanishing."""
from __future__ import annotations

import base64
import csv
import datetime as dt
import html
import re
import shutil
from pathlib import Path
from typing import Sequence

from netsurvey.db import Database
from netsurvey.errors import UsageError

from .figures import FigureContext, load_all, provenance_text, run_provenance
from .thesis_reference import MODEL_COMPARED, NOT_PUBLISHED, for_figure

CSS = """
body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}
section{border-top:1px solid #ccc;padding:.5em 0 1em}
section.missing{color:#555;background:#fafafa}
code{background:#f3f3f3;padding:1px 4px}
table{border-collapse:collapse;margin:.5em 0;font-size:90%}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}
img{max-width:100%;display:block;margin:.5em 0}
.tag{font-size:80%;padding:1px 6px;border-radius:3px;background:#ddd}
.ok{background:#cfe9cf}.no{background:#f3d9b1}.err{background:#f2b8b8}
"""

# Marks images that failed to decode (used by the headless-browser test and visible to readers).
CHECK_JS = """
window.addEventListener('load', function () {
  var bad = 0;
  document.querySelectorAll('img').forEach(function (im) {
    var ok = im.complete && im.naturalWidth > 0;
    im.setAttribute('data-loaded', ok ? 'yes' : 'no');
    if (!ok) { bad++; im.insertAdjacentHTML('afterend', '<p class="tag err">image failed to load</p>'); }
  });
  document.body.setAttribute('data-broken-images', String(bad));
});
"""


def _e(x) -> str:
    return html.escape(str(x))


def _csv_preview(path: Path, limit: int = 12) -> str:
    with path.open(newline="") as fh:
        rows = list(csv.reader(fh))
    if not rows:
        return ""
    head, body = rows[0], rows[1:]
    out = [f"<p>{_e(path.name)}: {len(body)} rows{' (first ' + str(limit) + ' shown)' if len(body) > limit else ''}</p>",
           "<table><tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr>"]
    for r in body[:limit]:
        out.append("<tr>" + "".join(f"<td>{_e(_fmt(v))}</td>" for v in r) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _fmt(v: str) -> str:
    try:
        f = float(v)
    except ValueError:
        return v
    return v if f.is_integer() and "." not in v else f"{f:.4g}"


def _section(spec, ctx: FigureContext | None, status: str, reason: str, out_dir: Path, runs: Sequence[int]) -> str:
    # pin the runs the figure actually used, so rebuilding it later gives the same figure
    pinned = (ctx.notes.get("runs") if ctx is not None and status == "ok" else None) or runs
    cmd = f"netsurvey plot {spec.name}" + "".join(f" --run {r}" for r in pinned) + " --out figures"
    parts = [f'<section id="{_e(spec.name)}" class="{ "missing" if status != "ok" else "" }" data-status="{status}">',
             f"<h2>{_e(spec.name)} <span class='tag'>{_e(spec.thesis or 'no thesis counterpart')}</span> "
             f"<span class='tag {'ok' if status == 'ok' else 'no' if status == 'missing' else 'err'}'>"
             f"{'rendered' if status == 'ok' else 'no data' if status == 'missing' else 'error'}</span></h2>",
             f"<p>{_e(spec.description)}</p>",
             f"<p>command: <code>{_e(cmd)}</code>; source tables: "
             f"{_e(', '.join(spec.sources) or 'none (analytic model with the thesis inputs)')}</p>"]
    if status != "ok":
        parts.append(f"<p><b>{'Missing data' if status == 'missing' else 'Failed'}:</b> {_e(reason)}</p>")
        parts.append(_thesis_only(spec.name) + "</section>")
        return "\n".join(parts)
    notes = ctx.notes
    run_text = ", ".join(map(str, notes.get("runs", []))) or "none (no measurement runs involved)"
    sample_text = "; ".join(f"{s['n']} {s['what']}" for s in notes.get("samples", [])) or "not recorded"
    parts.append(f"<p>scan runs: {_e(run_text)}; sample sizes: {_e(sample_text)}</p>")
    if notes.get("provenance"):
        parts.append(f"<p>{_e(provenance_text(notes['provenance']))}</p>")
    if notes.get("compare"):
        parts.append("<table><tr><th>quantity</th><th>thesis / paper</th><th>ours</th><th>unit</th></tr>")
        for c in notes["compare"]:
            th = "not published" if c["thesis"] is None else c["thesis"]
            ours = "n/a" if c["ours"] is None else (f"{c['ours']:.4g}" if isinstance(c["ours"], float) else c["ours"])
            title = f" title='{_e(c['quote'])}'" if c.get("quote") else ""
            parts.append(f"<tr><td>{_e(c['quantity'])}</td><td{title}>{_e(th)}</td><td>{_e(ours)}</td><td>{_e(c['unit'])}</td></tr>")
        parts.append("</table>")
    else:
        parts.append(_thesis_only(spec.name))
    for p in ctx.written:
        if p.suffix == ".png":
            b64 = base64.b64encode(p.read_bytes()).decode()
            parts.append(f'<img alt="{_e(p.stem)}" src="data:image/png;base64,{b64}">'
                         f'<p>files: <code>figures/{_e(p.name)}</code>, <code>figures/{_e(p.stem)}.svg</code></p>')
    for p in ctx.written:
        if p.suffix == ".csv":
            parts.append(_csv_preview(p))
    parts.append("</section>")
    return "\n".join(parts)


def _thesis_only(name: str) -> str:
    """The thesis's values for a section without our numbers beside them (no data, or a
    figure that does not compare), else why there are none (analysis/thesis_reference.py)."""
    refs = for_figure(name)
    if not refs and name in MODEL_COMPARED:
        return f"<p class='thesis'>thesis values: {_e(MODEL_COMPARED[name])}.</p>"
    if not refs:
        why = NOT_PUBLISHED.get(name, "no value entered in analysis/thesis_reference.py")
        return f"<p class='thesis'>thesis value: none published ({_e(why)}).</p>"
    rows = "".join(f"<tr><td>{_e(r.what + (f' [{r.series}]' if r.series else ''))}</td>"
                   f"<td title='{_e(r.quote)}'>{_e(r.value_text())} ({_e(r.where)})</td><td>{_e(r.unit)}</td></tr>"
                   for r in refs)
    return ("<p class='thesis'>thesis values:</p><table><tr><th>quantity</th><th>thesis</th><th>unit</th></tr>"
            f"{rows}</table>")


_THESIS_REF = re.compile(r"(\d+)\.(\d+)")


def thesis_order(thesis: str, name: str):
    """Sort key: thesis chapter and number (Fig 3.2 before Table 3.6 before Fig 4.5), then
    sections without a thesis counterpart, by name."""
    m = _THESIS_REF.search(thesis or "")
    return (0, int(m.group(1)), int(m.group(2)), name) if m else (1, 0, 0, name)


def _provenance_banner(prov: list[dict]) -> str:
    where = sorted({p["where"] for p in prov})
    rows = "".join(
        f"<tr><td>{p['run']}</td><td>{_e(p['kind'])}</td><td>{_e(p['status'])}</td><td>{_e(p['where'])}</td>"
        f"<td>{_e(p['netns'] or '')}</td><td>{_e(p['host'] or '')}</td><td>{_e((p['started_at'] or '')[:19])}</td>"
        f"<td>{_e((p['finished_at'] or '')[:19])}</td><td>{_e(p['list'] or '')}"
        f"{_e(' top ' + str(p['top']) if p['top'] else '')}</td></tr>" for p in prov)
    return (f"<h2>Where the data came from</h2><p class='provenance'><b>Data: {_e(' and '.join(where))}</b> "
            f"({len(prov)} scan runs; testbed = the emulated mini-Internet of config/testbed.toml, run in the "
            "nstb-vantage namespace; Internet = any other vantage). Times are UTC.</p>"
            "<table><tr><th>run</th><th>kind</th><th>status</th><th>data</th><th>namespace</th><th>vantage host</th>"
            f"<th>started</th><th>finished</th><th>target list</th></tr>{rows}</table>")


def build_report(db: Database, out_dir: Path, runs: Sequence[int] = ()) -> dict:
    """Render every registered figure into ``out_dir/figures`` and write ``out_dir/index.html``."""
    from netsurvey.inputs import known_runs, output_dir

    specs = dict(sorted(load_all().items(), key=lambda kv: thesis_order(kv[1].thesis, kv[0])))
    runs = known_runs(db, runs)
    fig_dir = output_dir(out_dir) / "figures"
    output_dir(fig_dir)
    if fig_dir.exists():
        shutil.rmtree(fig_dir)
    fig_dir.mkdir(parents=True)
    sections, summary = [], {"rendered": 0, "missing": 0, "failed": 0, "figures": {}}
    for name, spec in specs.items():
        ctx = FigureContext(db=db, runs=tuple(runs), out_dir=fig_dir, name=name)
        try:
            spec.fn(ctx)
            status, reason = "ok", ""
        except UsageError as exc:
            status, reason = "missing", str(exc)
        except Exception as exc:  # a broken figure is reported, never hidden
            status, reason = "failed", f"{type(exc).__name__}: {exc}"
        if status == "ok" and ctx.notes.get("runs") and "provenance" not in ctx.notes:
            ctx.notes["provenance"] = run_provenance(db, ctx.notes["runs"])
        if status == "ok" and not any(p.suffix in (".png", ".csv") for p in ctx.written):
            status, reason = "failed", "the figure function wrote no PNG or CSV"
        summary[{"ok": "rendered", "missing": "missing", "failed": "failed"}[status]] += 1
        summary["figures"][name] = {"status": status, "reason": reason, "files": [str(p) for p in ctx.written],
                                    "notes": ctx.notes}
        sections.append(_section(spec, ctx, status, reason, out_dir, runs))
    with db.connect() as conn:
        kinds = conn.execute("SELECT kind, count(*), count(*) FILTER (WHERE status = 'finished'), max(id) "
                             "FROM scan_run GROUP BY kind ORDER BY kind").fetchall()
    run_rows = "".join(f"<tr><td>{_e(k)}</td><td>{n}</td><td>{f}</td><td>{m}</td></tr>" for k, n, f, m in kinds) \
        or "<tr><td colspan=4>no scan runs in the database</td></tr>"
    used = sorted({r for f in summary["figures"].values() for r in f["notes"].get("runs", [])})
    banner = _provenance_banner(run_provenance(db, used)) if used else \
        "<p><b>Data:</b> no measurement runs were used (analytic models only).</p>"
    toc = "".join(f"<li><a href='#{_e(n)}'>{_e(n)}</a> ({_e(s.thesis)}): {summary['figures'][n]['status']}</li>"
                  for n, s in specs.items())
    doc = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>netsurvey report</title><style>{CSS}</style></head>
<body>
<h1>netsurvey report</h1>
<p>Generated by <code>netsurvey report --out {_e(out_dir)}</code>{''.join(f' --run {r}' for r in runs)}
from the database only (no network). {summary['rendered']} figures/tables rendered, {summary['missing']} without data,
{summary['failed']} failed. Generated at {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC.</p>
{banner}
<h2>Scan runs in the database</h2>
<table><tr><th>kind</th><th>runs</th><th>finished</th><th>latest id</th></tr>{run_rows}</table>
<h2>Contents</h2><ul>{toc}</ul>
{''.join(sections)}
<script>{CHECK_JS}</script>
</body></html>
"""
    index = out_dir / "index.html"
    index.write_text(doc)
    summary["index"] = str(index)
    return summary
