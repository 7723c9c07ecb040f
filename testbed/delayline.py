"""A userspace delay line between two namespaces: the timing testbed's link.

The kernel this testbed runs on may lack ``sch_netem`` (the Firecracker guest kernel of the
CI machine has tbf and htb but no netem: ``tc qdisc add ... netem`` answers "Specified qdisc
kind is unknown"). So the timing testbed's link is a pair of TUN devices, one in each
namespace, and this process: it reads every IP packet from one device and writes it to the
other after the profile's one-way delay (``rtt_ms / 2``, plus uniform jitter in
``[-jitter_ms, +jitter_ms]``, never reordering a direction), dropping ``loss_pct`` percent.
Rate limits are the kernel's tbf qdisc on the TUN devices (testbed/profiles.py).

Run: ``python -m testbed.delayline --a NETNS:DEV --b NETNS:DEV --profile FILE --applied FILE``.
FILE holds the profile as JSON (``name``, ``rtt_ms``, ``jitter_ms``, ``loss_pct``,
``rate_kbit``); SIGHUP re-reads it. After every (re)load the process writes what it applies
to ``--applied`` (JSON, plus ``pid`` and ``applied_at`` unix s): the ground truth
``testbed status --json`` reports. Precision: packets leave within ~0.2 ms of their due time
(a dedicated thread per direction, SCHED_FIFO when run as root, sleeps until half a
millisecond before the due time and spins the rest).
"""
from __future__ import annotations

import argparse
import ctypes
import fcntl
import heapq
import json
import os
import random
import select
import signal
import struct
import threading
import time
from pathlib import Path

CLONE_NEWNET = 0x40000000
TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000


def open_tun(netns: str, dev: str) -> int:
    """Attach to the (persistent) TUN device ``dev`` of namespace ``netns``."""
    libc = ctypes.CDLL(None, use_errno=True)
    me = os.open("/proc/self/ns/net", os.O_RDONLY)
    target = os.open(f"/run/netns/{netns}", os.O_RDONLY)
    try:
        if libc.setns(target, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {netns}")
        fd = os.open("/dev/net/tun", os.O_RDWR)
        fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", dev.encode(), IFF_TUN | IFF_NO_PI))
    finally:
        libc.setns(me, CLONE_NEWNET)
        os.close(me)
        os.close(target)
    return fd


def _realtime() -> None:
    """SCHED_FIFO for the calling thread (as root): packets leave on time on a busy machine."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
    except (OSError, AttributeError):
        pass


class Line:
    """One direction: packets in a heap by due time, sent by a thread of its own."""

    def __init__(self, out_fd: int, state: "Profile"):
        self.out_fd = out_fd
        self.state = state
        self.heap: list[tuple[float, int, bytes]] = []
        self.seq = 0
        self.last_due = 0.0
        self.cv = threading.Condition()
        threading.Thread(target=self._run, daemon=True).start()

    def push(self, pkt: bytes) -> None:
        p = self.state.current
        if p["loss_pct"] and random.random() * 100 < p["loss_pct"]:
            return
        delay = p["rtt_ms"] / 2000.0
        if p["jitter_ms"]:
            delay += random.uniform(-p["jitter_ms"], p["jitter_ms"]) / 1000.0
        due = max(time.monotonic() + max(delay, 0.0), self.last_due)  # never reorder
        self.last_due = due
        if due <= time.monotonic() and not self.heap:
            self._write(pkt)
            return
        with self.cv:
            self.seq += 1
            heapq.heappush(self.heap, (due, self.seq, pkt))
            self.cv.notify()

    def _write(self, pkt: bytes) -> None:
        try:
            os.write(self.out_fd, pkt)
        except OSError:
            pass  # the far device is down: the packet is lost, as on a wire

    def _run(self) -> None:
        _realtime()
        while True:
            with self.cv:
                while not self.heap:
                    self.cv.wait()
                due = self.heap[0][0]
                wait = due - time.monotonic()
                if wait > 0:
                    self.cv.wait(timeout=wait - 0.0005 if wait > 0.002 else 0)
                    if self.heap[0][0] - time.monotonic() > 0.0005:
                        continue
                    while self.heap[0][0] > time.monotonic():  # the last half millisecond: spin
                        pass
                _, _, pkt = heapq.heappop(self.heap)
            self._write(pkt)


class Profile:
    def __init__(self, path: str, applied: str):
        self.path, self.applied = path, applied
        self.current = {"name": "none", "rtt_ms": 0.0, "jitter_ms": 0.0, "loss_pct": 0.0, "rate_kbit": 0}
        self.load()

    def load(self) -> None:
        try:
            raw = json.loads(open(self.path).read())
            cur = {k: raw.get(k, 0) for k in ("rtt_ms", "jitter_ms", "loss_pct", "rate_kbit")}
            cur["name"] = str(raw.get("name", "?"))
            self.current = cur
        except (OSError, ValueError):
            pass
        tmp = self.applied + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(dict(self.current, pid=os.getpid(), applied_at=time.time()), fh)
        os.rename(tmp, self.applied)


# -- the owner's side (testbed/timing.py, testbed/trackline.py) ---------------------------
def wait_started(applied: Path, pid: int, timeout: float = 5.0) -> None:
    """Wait until the delay line ``pid`` reports itself in its applied file."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if json.loads(applied.read_text()).get("pid") == pid:
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.02)
    raise RuntimeError("the delay line did not start (see its log)")


def hand_profile(d: Path, pid: int, profile: dict) -> None:
    """Write ``profile`` (a [[profile]] as a dict) to ``d/profile.json`` of the delay line
    ``pid`` and wait until its ``d/applied.json`` reports it."""
    (d / "profile.json.tmp").write_text(json.dumps(profile))
    (d / "profile.json.tmp").rename(d / "profile.json")

    def now_applied() -> dict:
        try:
            return json.loads((d / "applied.json").read_text())
        except (OSError, ValueError):
            return {}
    before = now_applied().get("applied_at", 0)
    deadline = time.time() + 5
    next_hup = 0.0
    while time.time() < deadline:
        if time.time() >= next_hup:  # again after 0.5 s: a SIGHUP during its start-up may be lost
            os.kill(pid, signal.SIGHUP)
            next_hup = time.time() + 0.5
        now = now_applied()
        if now.get("applied_at", 0) > before and now.get("name") == profile.get("name"):
            return
        time.sleep(0.01)
    raise RuntimeError("the delay line did not confirm the profile")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--a", required=True, help="NETNS:DEV of one end")
    ap.add_argument("--b", required=True, help="NETNS:DEV of the other end")
    ap.add_argument("--profile", required=True)
    ap.add_argument("--applied", required=True)
    a = ap.parse_args()
    # handlers first: the manager sends SIGHUP as soon as --applied names this pid, and
    # SIGHUP's default action would end the process
    holder: list = []
    signal.signal(signal.SIGHUP, lambda *_: holder and holder[0].load())
    fa = open_tun(*a.a.split(":", 1))
    fb = open_tun(*a.b.split(":", 1))
    prof = Profile(a.profile, a.applied)
    holder.append(prof)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    _realtime()
    lines = {fa: Line(fb, prof), fb: Line(fa, prof)}
    poll = select.epoll()
    for fd in lines:
        poll.register(fd, select.EPOLLIN)
    while not stop:
        try:
            events = poll.poll(0.5)
        except InterruptedError:
            continue
        for fd, _ in events:
            try:
                pkt = os.read(fd, 65536)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError as exc:   # the device is gone (its namespace was deleted): polling
                # it again would spin; end, so the owner sees the line down and rebuilds it
                print(f"delayline: reading fd {fd}: {exc}; ending", flush=True)
                stop.append(1)
                break
            lines[fd].push(pkt)


if __name__ == "__main__":
    main()
