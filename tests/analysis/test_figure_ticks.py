"""Figures a reader can read: every figure the analysis can draw from a test database is
rendered and, on each of its axes, no two tick labels overlap (the extents matplotlib itself
computes for the drawn text: Text.get_window_extent with the figure's renderer). Duration
axes carry duration marks (1 min, 1 h, 1 d, 1 w), not crowded 1-2-5 numbers."""
from __future__ import annotations

import pytest
from test_thesis_reference import _fill

from analysis.figures import load_all, render
from netsurvey.errors import UsageError
from support.figures import _key_run, _run


def tick_label_overlaps(fig) -> list[tuple[str, str, str]]:
    """(axes title or index, label a, label b) for every pair of drawn tick labels of one
    axes whose boxes intersect by more than half a pixel each way."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    bad = []
    for k, ax in enumerate(fig.axes):
        if not ax.axison:
            continue
        boxes = []
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            for tick in [*axis.get_major_ticks(), *axis.get_minor_ticks()]:
                loc = tick.get_loc()
                if loc is None or not (lo - 1e-9 * abs(lo) <= loc <= hi + 1e-9 * abs(hi)):
                    continue
                for label in (tick.label1, tick.label2):
                    if label.get_visible() and label.get_text().strip():
                        boxes.append((label.get_text(), label.get_window_extent(renderer)))
        for i, (ta, a) in enumerate(boxes):
            for tb, b in boxes[i + 1:]:
                if min(a.x1, b.x1) - max(a.x0, b.x0) > 0.5 and min(a.y1, b.y1) - max(a.y0, b.y0) > 0.5:
                    bad.append((ax.get_title() or str(k), ta, tb))
    return bad


def _wide(conn) -> dict[str, int]:
    """Runs whose values span seconds to weeks (the demo's hints do): the newest of their kinds
    (tls-key-rotation reads every finished tls run, the other figures the newest)."""
    rot = _key_run(conn, {"r1.test": 100.0, "r2.test": 4000.0, "r3.test": 400000.0, "r4.test": 3000000.0})
    tls = _run(conn, "tls")
    for i, hint in enumerate([1, 30, 60, 300, 300, 600, 3600, 7200, 86400, 100800, 172800, 604800]):
        conn.execute("INSERT INTO tls_handshake (run_id, rank, hostname, port, version, status, ticket_count,"
                     " ticket_lifetime, session_id_len) VALUES (%s, %s, %s, 443, %s, 'success', 1, %s, 32)",
                     (tls, i + 1, f"w{i}.test", "1.2" if i % 3 else "1.3", hint))
    life = _run(conn, "tls-lifetime")
    for i, age in enumerate([1.0, 45.0, 300.0, 1800.0, 5400.0, 86400.0, 172800.0]):
        for mech in ("id", "ticket"):
            conn.execute("INSERT INTO tls_resumption (run_id, mechanism, version, origin_host, origin_address, host,"
                         " address, age_s, resumed, status) VALUES (%s, %s, '1.2', %s, '198.18.2.1', %s,"
                         " '198.18.2.1', %s, true, 'success')", (life, mech, f"w{i}.test", f"w{i}.test", age))
    ttl = _run(conn, "dns-ttl")
    for i, (qtype, t) in enumerate([("A", 1), ("A", 60), ("A", 300), ("A", 3600), ("A", 86400), ("AAAA", 300),
                                    ("AAAA", 604800), ("A", 2147483647)]):
        conn.execute("INSERT INTO dns_ttl_probe (run_id, hostname, qtype, outcome, ttl) VALUES (%s, %s, %s,"
                     " 'answer', %s)", (ttl, f"w{i}.test", qtype, t))
    return {"tls": tls, "tls-lifetime": life, "dns-ttl": ttl, "tls-rotation": rot}


def test_every_figure_has_tick_labels_that_do_not_overlap(db, tmp_path, monkeypatch):
    import analysis.style as style

    with db.connect() as conn:
        _fill(conn)
        _wide(conn)
    checked: dict[str, list] = {}
    labels: dict[str, list[str]] = {}
    save = style.save

    def checking_save(fig, out_dir, name):
        checked[name] = tick_label_overlaps(fig)
        labels[name] = [t.get_text() for ax in fig.axes for t in ax.get_xticklabels() if t.get_text()]
        return save(fig, out_dir, name)

    monkeypatch.setattr(style, "save", checking_save)
    skipped = {}
    for name in sorted(load_all()):
        try:
            render(db, name, tmp_path / name)
        except UsageError as exc:       # no data of that kind in this database
            skipped[name] = str(exc)
    # the figures of the data written above are among those drawn
    for name in ("tls-lifetime-hint", "tls-lifetime-hint-tail", "tls-lifetime-measured", "tls-key-rotation",
                 "dns-ttl-cdf", "atlas-resolver-rtt", "tls-support", "tfo-addresses-per-host", "quic-support",
                 "tls-shared-groups", "oob-tokens", "quicsocks-table"):
        assert name in checked, (name, skipped.get(name))
    assert len(checked) >= 20, (sorted(checked), skipped)
    overlapping = {k: v for k, v in checked.items() if v}
    assert not overlapping, overlapping
    # durations read as durations on every duration axis
    import re

    for name in ("tls-lifetime-hint", "tls-lifetime-hint-tail", "dns-ttl-cdf", "tls-key-rotation",
                 "tls-lifetime-measured"):
        assert all(re.fullmatch(r"0|[\d.]+ (ms|s|min|h|d|w|y)", t) for t in labels[name]), (name, labels[name])
    for name in ("tls-lifetime-hint", "tls-lifetime-hint-tail", "dns-ttl-cdf"):      # log axes
        assert {"1 min", "1 h", "1 d"} <= set(labels[name]), (name, labels[name])
    assert "1 w" in labels["tls-lifetime-hint-tail"], labels["tls-lifetime-hint-tail"]


@pytest.mark.unit
def test_duration_ticks_and_texts():
    from analysis.style import _lin_duration_ticks, _log_duration_ticks, duration_text

    assert [duration_text(s) for s in (0, 0.5, 30, 60, 300, 3600, 5400, 86400, 604800, 31536000)] == [
        "0", "500 ms", "30 s", "1 min", "5 min", "1 h", "1.5 h", "1 d", "1 w", "1 y"]
    assert [duration_text(s) for s in _log_duration_ticks(1, 1e6)] == ["1 s", "1 min", "1 h", "1 d", "1 w"]
    assert [duration_text(s) for s in _lin_duration_ticks(0, 86400)] == ["0", "6 h", "12 h", "18 h", "1 d"]
    assert len(_log_duration_ticks(1e-3, 4e8)) <= 7
