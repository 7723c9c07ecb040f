"""The tracking vantage (issue 25, item 4): browsers of ``browser track`` behind a delay line.

The tracking experiments' hosts (``*.track.test``, tpa/tpb.test, the QUIC track hosts,
www.example.test with TFO) live on the shared testbed, whose links cannot carry delay on a
kernel without ``sch_netem`` (this machine's: ``CONFIG_NET_SCH_NETEM`` is not set and modules
are off, so ``tc qdisc add ... netem`` in any namespace answers "Specified qdisc kind is
unknown"). Instead of copying every host, its observer and QUIC logs into the timing testbed,
the *client* moves behind a delay line: namespace ``nstt-<timing.track_ns>`` (198.18.251.1 /
2001:2:0:251::1) holds TUN ``tkv0``; its peer TUN ``tkg0`` lives in the shared vantage
(``nstb-vantage``), which already forwards between its links and is every server namespace's
default route; testbed/delayline.py (the timing testbed's delay line, a second instance)
copies packets between the two after the profile's one-way delay. So every packet between a
browser here and any shared host crosses the delay line once each way; the shared vantage's
own scanners are untouched (their traffic never enters tkg0). DNS goes to the shared resolver
through the line too (a name lookup costs one RTT, as on a real access link).

Host class ``track`` (testbed/profiles.py): ``netsurvey testbed profile lte --class track``;
``browser track --profile P`` does that, runs itself here and switches back to ``none``.
State lives in ``<state dir>/timing/track/`` (the timing testbed's own processes are
exempt from the shared testbed's orphan sweep); ``testbed timing down`` and ``testbed down``
remove it (it does not depend on the timing testbed: rebuilding that leaves it alone). Its
profile is the one its delay line reports (``testbed status --json`` -> profiles.applied.track). A rebuilt shared testbed loses ``tkg0``: :func:`healthy` notices, :func:`up`
rebuilds.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

from . import netns
from .model import Profile, TestbedConfig

REPO = Path(__file__).resolve().parent.parent
SHARED_VANTAGE = "nstb-vantage"
#: the TUN device in the tracking vantage and its peer in the shared vantage
DEV, PEER_DEV = "tkv0", "tkg0"
#: bumped when what `up` builds changes
LAYOUT = 2   # 2: testbed routes instead of a default route


def netns_name(cfg: TestbedConfig) -> str:
    from .timing import netns_name as tns  # the timing testbed's prefix: a shared rebuild leaves it

    return tns(cfg.timing.track_ns)


def _dir() -> Path:
    """``<state dir>/timing/track``: under the timing testbed's directory, whose processes the
    shared testbed's orphan sweep leaves alone (testbed/manager.py ``_orphans``)."""
    from .procs import state_dir

    return state_dir() / "timing" / "track"


def _state() -> dict:
    from .procs import load_state

    return load_state(_dir())


def _save(st: dict) -> None:
    from .procs import save_state

    save_state(_dir(), st)


def _alive(p: dict) -> bool:
    from .procs import pid_alive

    return pid_alive(p["pid"], p["argv"][0])


def _peer_present() -> bool:
    r = subprocess.run(["ip", "-n", SHARED_VANTAGE, "link", "show", PEER_DEV], capture_output=True)
    return r.returncode == 0


def healthy(cfg: TestbedConfig) -> bool:
    st = _state()
    return (bool(st.get("complete")) and st.get("layout") == LAYOUT and netns_name(cfg) in set(netns.list_netns())
            and _peer_present() and all(_alive(p) for p in st.get("procs", [])))


def up(cfg: TestbedConfig, log=print) -> dict:
    """Create the tracking vantage and its delay line (idempotent; profile 'none')."""
    if healthy(cfg):
        return status(cfg)
    if SHARED_VANTAGE not in set(netns.list_netns()):
        raise RuntimeError("the shared testbed is not up (netsurvey testbed up)")
    down(cfg, log=lambda *_: None)
    t0 = time.time()
    t = cfg.timing
    ns = netns_name(cfg)
    d = _dir()
    st = {"namespaces": [ns], "procs": [], "complete": False, "layout": LAYOUT}
    _save(st)
    netns.add_netns(ns)
    netns.ip_batch([f"tuntap add dev {DEV} mode tun", f"addr add {t.track_v4}/24 dev {DEV}",
                    f"addr add {t.track_v6}/64 dev {DEV} nodad", f"link set {DEV} mtu 1500 up",
                    # the testbed's ranges only, never a default route: the etiquette refuses
                    # testbed addresses over a default route (netsurvey/routes.py), and a
                    # browser's background traffic to anything else finds no route
                    f"route add 198.18.0.0/15 dev {DEV}", f"route add 2001:2::/48 dev {DEV}"], ns=ns)
    # the shared vantage routes the tracking vantage's prefixes into tkg0 (it forwards already)
    import ipaddress

    n4 = ipaddress.ip_network(f"{t.track_v4}/24", strict=False)
    n6 = ipaddress.ip_network(f"{t.track_v6}/64", strict=False)
    netns.ip_batch([f"tuntap add dev {PEER_DEV} mode tun", f"link set {PEER_DEV} mtu 1500 up",
                    f"route add {n4} dev {PEER_DEV}", f"route add {n6} dev {PEER_DEV}"], ns=SHARED_VANTAGE)
    netns.sysctl(ns, {"net.ipv4.tcp_fastopen": "1"})   # as the shared vantage (cross-app TFO)
    netns.write_resolv_conf(ns, [cfg.network.resolver_v4, cfg.network.resolver_v6])
    d.mkdir(parents=True, exist_ok=True)
    (d / "profile.json").write_text(json.dumps(cfg.profile("none").model_dump()))
    argv = [sys.executable, "-m", "testbed.delayline", "--a", f"{ns}:{DEV}", "--b", f"{SHARED_VANTAGE}:{PEER_DEV}",
            "--profile", str(d / "profile.json"), "--applied", str(d / "applied.json")]
    (d / "logs").mkdir(exist_ok=True)
    log_path = d / "logs" / "delayline.log"
    with log_path.open("ab") as fh:
        p = subprocess.Popen(["ip", "netns", "exec", ns, *argv], stdout=fh, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, env=dict(os.environ, PYTHONPATH=str(REPO)),
                             start_new_session=True)
    st["procs"].append({"name": "delayline", "namespace": ns, "pid": p.pid, "argv": argv, "log": str(log_path)})
    _save(st)
    from .delayline import wait_started

    wait_started(d / "applied.json", p.pid)
    st["complete"] = True
    _save(st)
    log(f"tracking vantage up: {ns} behind a delay line into {SHARED_VANTAGE} in {time.time() - t0:.1f} s")
    return status(cfg)


def down(cfg: Optional[TestbedConfig] = None, log=print) -> None:
    """Stop the delay line, remove the namespace, tkg0 and its routes in the shared vantage."""
    from .procs import ProcState, _kill

    st = _state()
    for p in reversed(st.get("procs", [])):
        _kill(ProcState(p["name"], p["namespace"], p["pid"], p["argv"], p["log"]))
    names = set(st.get("namespaces", []))
    if cfg is not None:
        names.add(netns_name(cfg))
    existing = set(netns.list_netns())
    for n in names & existing:
        netns.del_netns(n)
    for n in names:
        netns.remove_resolv_conf(n)
    if SHARED_VANTAGE in existing and _peer_present():   # its routes go with the device
        subprocess.run(["ip", "-n", SHARED_VANTAGE, "link", "del", PEER_DEV], capture_output=True)
    for f in (_dir() / "state.json", _dir() / "applied.json"):
        if f.exists():
            f.unlink()
    if names & existing:
        log(f"tracking vantage down ({len(names & existing)} namespaces removed)")


def set_delay_profile(cfg: TestbedConfig, p: Profile) -> None:
    from .delayline import hand_profile
    from .model import ProfileError

    dl = next((x for x in _state().get("procs", []) if x["name"] == "delayline"), None)
    if dl is None or not _alive(dl) or not healthy(cfg):
        raise ProfileError("the tracking vantage is not up (browser track --profile P brings it up)")
    hand_profile(_dir(), dl["pid"], p.model_dump())


def delay_line_applied() -> Optional[dict]:
    try:
        return json.loads((_dir() / "applied.json").read_text())
    except (OSError, ValueError):
        return None


def status(cfg: TestbedConfig) -> dict:
    t = cfg.timing
    up_ = healthy(cfg)
    return {"up": up_, "netns": netns_name(cfg), "v4": t.track_v4, "v6": t.track_v6,
            "peer": f"{SHARED_VANTAGE}:{PEER_DEV}", "delay_line": delay_line_applied() if up_ else None}


def in_track_vantage(cfg: TestbedConfig) -> bool:
    """Does this process run in the tracking vantage (its address is bindable here)?"""
    import socket

    try:
        with socket.socket() as s:   # bind only: no packet leaves
            s.bind((cfg.timing.track_v4, 0))
        return True
    except OSError:
        return False
