"""Link profiles (issue 25): apply, switch and read back ``[[profile]]``s per host class.

Host classes: every ``[[namespace]]`` of the shared testbed (its link is the veth pair
``tb-NAME`` in the vantage / ``eth0`` in the namespace) and ``timing``, the timing testbed's
TUN link (testbed/timing.py, testbed/delayline.py).

* Shared classes: netem (delay ``rtt_ms / 2``, jitter, loss) as the root qdisc of both ends
  of the veth, with a tbf child for ``rate_kbit``. Kernels without ``sch_netem`` refuse
  delay, jitter and loss there (one clear error); a rate-only profile is a root tbf.
* ``track``: the tracking vantage's link into the shared vantage (testbed/trackline.py), a
  second delay line, as ``timing``.
* ``timing``: the delay line applies delay, jitter and loss (it re-reads its profile file on
  SIGHUP); tbf on both TUN devices applies the rate.

Ground truth: :func:`applied` reads the qdiscs back from the kernel (``tc -j qdisc show``) and
the delay line's own report of what it applies; the name last switched to is kept in
``<state dir>/profiles.json``.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
from typing import Optional

from . import netns
from .model import Profile, ProfileError, TestbedConfig  # noqa: F401 (ProfileError: callers import it here)
from .procs import netns_name, state_dir

TIMING = "timing"
#: the tracking vantage's link (testbed/trackline.py): a delay line like the timing testbed's
TRACK = "track"
#: classes whose delay (and jitter, loss) a userspace delay line applies, not netem
DELAY_LINE_CLASSES = (TIMING, TRACK)
#: tbf burst and queue latency bound (the kernel needs both; a burst of 64 KiB lets TSO-sized
#: segments through at any rate we configure).
TBF_BURST = "64kb"
TBF_LATENCY = "200ms"


def classes(cfg: TestbedConfig) -> dict[str, list[tuple[str, str]]]:
    """Host class -> the (netns, device) ends of its link."""
    out = {n.name: [(netns_name("vantage"), f"tb-{n.name}"), (netns_name(n.name), "eth0")]
           for n in cfg.namespaces}
    from .timing import netns_name as timing_ns

    t = cfg.timing
    out[TIMING] = [(timing_ns(t.vantage_ns), "tmv0"), (timing_ns(t.server_ns), "tms0")]
    from . import trackline

    out[TRACK] = [(trackline.netns_name(cfg), trackline.DEV), (trackline.SHARED_VANTAGE, trackline.PEER_DEV)]
    return out


def _tc(ns: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(["tc", "-n", ns, *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise ProfileError(f"tc -n {ns} {' '.join(args)}: {r.stderr.strip()}")
    return r


def _clear(ns: str, dev: str) -> None:
    _tc(ns, "qdisc", "del", "dev", dev, "root", check=False)


def _netem_args(p: Profile) -> list[str]:
    a = ["delay", f"{p.rtt_ms / 2:.3f}ms"]
    if p.jitter_ms:
        a.append(f"{p.jitter_ms:.3f}ms")
    if p.loss_pct:
        a += ["loss", f"{p.loss_pct}%"]
    return a


def _apply_qdiscs(ns: str, dev: str, p: Profile, delay_in_kernel: bool) -> None:
    _clear(ns, dev)
    if p.is_none:
        return
    wants_netem = delay_in_kernel and (p.rtt_ms or p.jitter_ms or p.loss_pct)
    if wants_netem:
        r = _tc(ns, "qdisc", "add", "dev", dev, "root", "handle", "1:", "netem", *_netem_args(p), check=False)
        if r.returncode != 0:
            raise ProfileError(f"cannot add netem on {dev} in {ns} ({r.stderr.strip()}): this kernel lacks "
                               "sch_netem; delay profiles work on the timing testbed (class 'timing') only")
        if p.rate_kbit:
            _tc(ns, "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", "tbf", "rate",
                f"{p.rate_kbit}kbit", "burst", TBF_BURST, "latency", TBF_LATENCY)
    elif p.rate_kbit:
        _tc(ns, "qdisc", "add", "dev", dev, "root", "handle", "1:", "tbf", "rate", f"{p.rate_kbit}kbit",
            "burst", TBF_BURST, "latency", TBF_LATENCY)


def _recorded() -> dict:
    p = state_dir() / "profiles.json"
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return {}


def _record(cls: str, name: str) -> None:
    d = state_dir()
    d.mkdir(parents=True, exist_ok=True)
    cur = _recorded()
    cur[cls] = name
    tmp = d / "profiles.json.tmp"
    tmp.write_text(json.dumps(cur, indent=1))
    tmp.rename(d / "profiles.json")


def apply(cfg: TestbedConfig, name: str, host_classes: list[str]) -> dict:
    """Switch ``host_classes`` to profile ``name``; returns :func:`applied` for them."""
    try:
        p = cfg.profile(name)
    except KeyError:
        raise ProfileError(f"unknown profile {name!r} (known: {', '.join(x.name for x in cfg.profiles)})") from None
    known = classes(cfg)
    existing = set(netns.list_netns())
    for c in host_classes:
        if c not in known:
            raise ProfileError(f"unknown host class {c!r} (known: {', '.join(known)})")
        for ns, _ in known[c]:
            if ns not in existing:
                raise ProfileError(f"host class {c!r}: namespace {ns} does not exist (is its testbed up?)")
    for c in host_classes:
        if c == TIMING:
            from .timing import set_delay_profile

            set_delay_profile(cfg, p)
        elif c == TRACK:
            from .trackline import set_delay_profile as set_track

            set_track(cfg, p)
        for ns, dev in known[c]:
            _apply_qdiscs(ns, dev, p, delay_in_kernel=c not in DELAY_LINE_CLASSES)
        _record(c, p.name)
    return {c: v for c, v in applied(cfg).items() if c in host_classes}


def _read_qdiscs(ns: str) -> dict[str, list[dict]]:
    r = _tc(ns, "-j", "qdisc", "show", check=False)
    out: dict[str, list[dict]] = {}
    try:
        for q in json.loads(r.stdout or "[]"):
            out.setdefault(q.get("dev", ""), []).append(q)
    except ValueError:
        pass
    return out


def _describe(qs: list[dict]) -> dict:
    """What a device's qdiscs add, in the profile's units (per direction)."""
    d = {"delay_ms": 0.0, "jitter_ms": 0.0, "loss_pct": 0.0, "rate_kbit": 0, "qdiscs": []}
    for q in qs:
        kind, opt = q.get("kind"), q.get("options", {})
        if kind in ("noqueue", "pfifo_fast", "mq", "fq_codel"):
            continue
        d["qdiscs"].append(kind)
        if kind == "netem":
            d["delay_ms"] = round(float(opt.get("delay", {}).get("delay", 0)) * 1000, 3)
            d["jitter_ms"] = round(float(opt.get("delay", {}).get("jitter", 0)) * 1000, 3)
            d["loss_pct"] = round(float(opt.get("loss-random", {}).get("loss", 0)) * 100, 3)
        elif kind == "tbf":
            d["rate_kbit"] = int(int(opt.get("rate", 0)) * 8 / 1000)
    return d


def applied(cfg: TestbedConfig) -> dict:
    """Per host class whose namespaces exist: the recorded profile name and, per link end,
    what the kernel (and, for 'timing', the delay line) really applies."""
    existing = set(netns.list_netns())
    rec = _recorded()
    out = {}
    cache: dict[str, dict] = {}
    for c, ends in classes(cfg).items():
        if not all(ns in existing for ns, _ in ends):
            continue
        info = {"profile": rec.get(c, "none"), "ends": []}
        for ns, dev in ends:
            if ns not in cache:
                cache[ns] = _read_qdiscs(ns)
            info["ends"].append(dict(_describe(cache[ns].get(dev, [])), netns=ns, dev=dev))
        if c == TIMING:
            from .timing import delay_line_applied

            info["delay_line"] = delay_line_applied()
        elif c == TRACK:   # its profile is what its delay line applies (it may be rebuilt at 'none')
            from .trackline import delay_line_applied as track_applied

            info["delay_line"] = track_applied()
            info["profile"] = (info["delay_line"] or {}).get("name", info["profile"])
        out[c] = info
    return out


def ground_truth(cfg: TestbedConfig) -> dict:
    return {"default": cfg.default_profile,
            "definitions": [p.model_dump() for p in cfg.profiles],
            "classes": sorted(classes(cfg)),
            "applied": applied(cfg)}


def hup(pid: Optional[int]) -> None:
    if pid:
        os.kill(pid, signal.SIGHUP)
