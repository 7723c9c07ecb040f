"""A stateless, ZMap-style SYN engine for TFO probing.

* Sender: raw sockets (IPv4 with ``IP_HDRINCL``; IPv6 ``IPPROTO_TCP`` with the kernel
  computing the checksum) and ``sendmmsg(2)`` via ctypes. IPv4 cookie requests (the bulk
  of a scan) are computed a batch at a time with numpy into a ring of prebuilt packets:
  hash, source port, sequence number, incremental checksum and the allow/block policy
  check are array operations, so no Python runs per probe. IPv6 and cookie-carrying
  probes take a per-probe path. ``rate`` [probes/s] paces batches. With ``senders`` > 1
  forked, CPU-pinned processes send the batches they claim from a shared counter.
* Matching: no per-probe state. Probe ``i`` to (addr, port) carries
  ``seq = i + H(addr, port)`` and source port ``BASE + (H>>32 + i) mod RANGE`` where H is a
  keyed 64-bit hash with the run's seed; a reply is attributed to index
  ``ack - 1 - H(addr, port)`` (minus the SYN data length when data was sent) and accepted
  only if that index exists and the destination port matches too.
* Receiver: a separate process (no GIL sharing) reading raw ``IPPROTO_TCP`` sockets with a
  256 MiB receive buffer (IPv4 with ``recvmmsg`` and numpy matching), sending matched
  replies to the sender as packed records. While it sends as fast as it can, the sender
  only collects them and hands them to the caller when pacing leaves it idle, when
  ``MAX_PENDING`` replies are waiting, and after the last probe.
* Memory: one byte per target in each process (answered or not) plus at most
  ``MAX_PENDING`` waiting replies; targets are read by index from any sequence (a list,
  or a lazily computed :class:`AddressRange`), so 1M targets cost ~1 MB each.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import ipaddress
import multiprocessing as mp
import multiprocessing.connection
import os
import select
import socket
import struct
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterator, NamedTuple, Optional, Sequence

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # no BLAS used; keep its idle threads away
import numpy as np  # noqa: E402

from .packets import FLAG_ACK, FLAG_RST, FLAG_SYN, SynTemplate, syn_options, tcp_segment

if TYPE_CHECKING:
    from netsurvey.etiquette import TargetPolicy

M32, M64 = 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF
#: Source ports used by probes: outside Linux's ephemeral range (32768-60999), so replies
#: never collide with the vantage's own connections.
PORT_BASE, PORT_RANGE = 61000, 4500
SO_RCVBUFFORCE = 33
IPV6_CHECKSUM = 7
RCVBUF = 256 << 20
#: Most replies the sender keeps before handing them to the caller (memory bound).
MAX_PENDING = 1 << 16
MSG_DONTWAIT = 0x40


@dataclass(frozen=True)
class RawTarget:
    """One probe: destination address (text), TCP port and, for a cookie-reuse probe,
    the Fast Open cookie to present (None = request a cookie)."""

    address: str
    port: int
    cookie: Optional[bytes] = None


class RawReply(NamedTuple):
    """A reply matched to probe ``index``: TCP ``flags``, ``acked_data`` = number of SYN
    data bytes the SYN-ACK acknowledges (0 or the probe's data length), the advertised
    ``window`` [bytes, unscaled] and the raw TCP ``options`` bytes; ``source`` is the
    reply's source address."""

    index: int  # type: ignore[assignment]  # the field hides tuple.index(), which nothing calls
    flags: int
    acked_data: int
    window: int
    options: bytes
    source: str

    @property
    def is_synack(self) -> bool:
        return self.flags & (FLAG_SYN | FLAG_ACK) == (FLAG_SYN | FLAG_ACK)

    @property
    def is_rst(self) -> bool:
        return bool(self.flags & FLAG_RST)


@dataclass(frozen=True)
class EngineOptions:
    """``rate``: probes per second (0 = as fast as possible); ``cooldown``: seconds to wait
    for replies after the last probe; ``seed``: 64-bit key of the matching hash (one per
    run); ``batch``: probes per ``sendmmsg`` call (0 = 1024 unpaced, else about 1 ms of
    ``rate``); ``experimental``: request cookies with option 254/0xF989 instead of option
    34; ``data``: payload of cookie-carrying SYNs; ``policy``: if set, targets it refuses
    are never sent and come back with the error 'blocked by policy'; ``senders``: sending
    processes, at most one per CPU (each pinned to its CPU, claiming the next unsent batch
    from a shared counter and sending at ``rate / senders``; on a veth the kernel's
    handling of each probe runs on the sending CPU, so one sender is bound by that CPU)."""

    rate: float = 0.0
    cooldown: float = 1.0
    seed: int = 0
    batch: int = 0
    experimental: bool = False
    data: bytes = b""
    policy: Optional["TargetPolicy"] = None
    senders: int = 1


def keyed_hash(seed: int, addr: int, port: int) -> int:
    """Keyed 64-bit mix (splitmix64 finaliser) of (address, port)."""
    z = ((addr & M64) ^ (addr >> 64) ^ (port << 48) ^ seed) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    z ^= z >> 31
    return (z + seed * 0x9E3779B97F4A7C15) & M64


_C1, _C2, _C3 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB), 0x9E3779B97F4A7C15
_S27, _S30, _S31, _S32, _S48 = (np.uint64(s) for s in (27, 30, 31, 32, 48))


def keyed_hash_np(seed: int, addr: np.ndarray, port: np.ndarray) -> np.ndarray:
    """:func:`keyed_hash` over uint64 arrays of IPv4 addresses and ports."""
    z = addr ^ (port << _S48) ^ np.uint64(seed)
    z = (z ^ (z >> _S30)) * _C1
    z = (z ^ (z >> _S27)) * _C2
    z ^= z >> _S31
    return z + np.uint64((seed * _C3) & M64)


def addr_int(address: str) -> int:
    if ":" in address:
        return int.from_bytes(socket.inet_pton(socket.AF_INET6, address), "big")
    return int.from_bytes(socket.inet_aton(address), "big")


def probe_fields(seed: int, index: int, address: str, port: int) -> tuple[int, int]:
    """(source port, sequence number) of probe ``index``."""
    h = keyed_hash(seed, addr_int(address), port)
    return PORT_BASE + ((h >> 32) + index) % PORT_RANGE, (index + h) & M32


def source_address(dest: str) -> str:
    """The vantage address the kernel would use towards ``dest`` (UDP connect, no packet)."""
    fam = socket.AF_INET6 if ":" in dest else socket.AF_INET
    with socket.socket(fam, socket.SOCK_DGRAM) as s:
        s.connect((dest, 9))
        return s.getsockname()[0]


# -- sendmmsg via ctypes ---------------------------------------------------------------
class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


class _Msghdr(ctypes.Structure):
    _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint32), ("iov", ctypes.c_void_p),
                ("iovlen", ctypes.c_size_t), ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                ("flags", ctypes.c_int)]


class _Mmsghdr(ctypes.Structure):
    _fields_ = [("hdr", _Msghdr), ("len", ctypes.c_uint)]


_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_libc.sendmmsg.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int]
_libc.sendmmsg.restype = ctypes.c_int
_libc.recvmmsg.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int, ctypes.c_void_p]
_libc.recvmmsg.restype = ctypes.c_int

SLOT = 128  # bytes per packet slot (largest probe: 20 IP + 60 TCP + small data)


class _BatchSender:
    """A ring of ``n`` packet slots and addresses for one socket family."""

    def __init__(self, sock: socket.socket, family: int, n: int):
        self.sock, self.family, self.n = sock, family, n
        self.namelen = 16 if family == socket.AF_INET else 28
        self.pkts = (ctypes.c_char * (SLOT * n))()
        self.names = (ctypes.c_char * (self.namelen * n))()
        self.iov = (_Iovec * n)()
        self.msgs = (_Mmsghdr * n)()
        self.pview = memoryview(self.pkts).cast("B")
        self.nview = memoryview(self.names).cast("B")
        self.index = [0] * n
        for i in range(n):
            self.iov[i].base = ctypes.addressof(self.pkts) + i * SLOT
            self.msgs[i].hdr.name = ctypes.addressof(self.names) + i * self.namelen
            self.msgs[i].hdr.namelen = self.namelen
            self.msgs[i].hdr.iov = ctypes.addressof(self.iov[i])
            self.msgs[i].hdr.iovlen = 1
            struct.pack_into("=H", self.nview, i * self.namelen, family)
        self.fill = 0

    def flush(self) -> list[tuple[int, str]]:
        """Send the filled slots; returns (target index, error) for messages that failed."""
        failed = _sendmmsg(self.sock.fileno(), self.msgs, self.fill, self.index)
        self.fill = 0
        return failed


def _sendmmsg(fd: int, msgs, count: int, index) -> list[tuple[int, str]]:
    """Send ``msgs[:count]``, retrying on a full queue; (index[k], error) for each failure."""
    failed, start = [], 0
    size = ctypes.sizeof(_Mmsghdr)
    while start < count:
        r = _libc.sendmmsg(fd, ctypes.byref(msgs, start * size), count - start, 0)
        if r < 0:
            e = ctypes.get_errno()
            if e in (errno.EINTR, errno.ENOBUFS, errno.EAGAIN):
                time.sleep(0.0005)
                continue
            failed.append((int(index[start]), errno.errorcode.get(e, str(e))))
            start += 1
        else:
            start += r
    return failed


#: Variable fields of an IPv4 probe slot (IP destination; TCP ports, sequence, checksum)
#: and of its sockaddr_in.
_SLOT_DT = np.dtype({"names": ["dst", "sport", "dport", "seq", "csum"],
                     "formats": [">u4", ">u2", ">u2", ">u4", ">u2"],
                     "offsets": [16, 20, 22, 24, 36], "itemsize": SLOT})
_NAME4_DT = np.dtype({"names": ["addr"], "formats": [">u4"], "offsets": [4], "itemsize": 16})
_M16, _M32N = np.uint64(0xFFFF), np.uint64(M32)


class _V4Ring:
    """``n`` IPv4 slots holding one cookie-request template (destination port 0 in its
    constant checksum part), with prebuilt sendmmsg headers; :meth:`send` fills a batch
    with array operations and sends it in one call."""

    def __init__(self, sock: socket.socket, tpl: SynTemplate, n: int):
        self.sock, self.n, self.const = sock, n, np.uint64(tpl.const_sum)
        self.pkts = (ctypes.c_char * (SLOT * n))()
        self.names = (ctypes.c_char * (16 * n))()
        self.iov = (_Iovec * n)()
        self.msgs = (_Mmsghdr * n)()
        raw = np.frombuffer(self.pkts, np.uint8).reshape(n, SLOT)  # type: ignore[call-overload]  # ctypes arrays are buffers
        raw[:, :len(tpl.packet)] = np.frombuffer(tpl.packet, np.uint8)
        np.frombuffer(self.names, np.uint8).reshape(n, 16)[:, :2] = np.frombuffer(  # type: ignore[call-overload]  # (as above)
            struct.pack("=H", socket.AF_INET), np.uint8)
        pbase, nbase = ctypes.addressof(self.pkts), ctypes.addressof(self.names)
        for i in range(n):
            self.iov[i].base, self.iov[i].len = pbase + i * SLOT, len(tpl.packet)
            h = self.msgs[i].hdr
            h.name, h.namelen, h.iov, h.iovlen = nbase + i * 16, 16, ctypes.addressof(self.iov[i]), 1
        self.slots = np.frombuffer(self.pkts, _SLOT_DT)  # type: ignore[call-overload]  # (as above)
        self.addr = np.frombuffer(self.names, _NAME4_DT)["addr"]  # type: ignore[call-overload]  # (as above)

    def send(self, seed: int, idx: np.ndarray, dst: np.ndarray, dport: np.ndarray) -> list[tuple[int, str]]:
        """Probe ``dst[k]:dport[k]`` as probe ``idx[k]`` (uint64 arrays, at most ``n``)."""
        self.fill(seed, idx, dst, dport)
        return _sendmmsg(self.sock.fileno(), self.msgs, len(idx), idx)

    def fill(self, seed: int, idx: np.ndarray, dst: np.ndarray, dport: np.ndarray) -> None:
        """Write the probes of :meth:`send` into the first ``len(idx)`` slots."""
        k = len(idx)
        h = keyed_hash_np(seed, dst, dport)
        sport = np.uint64(PORT_BASE) + ((h >> _S32) + idx) % np.uint64(PORT_RANGE)
        seq = (idx + h) & _M32N
        s = self.const + (dst >> np.uint64(16)) + (dst & _M16) + dport + sport + (seq >> np.uint64(16)) + (seq & _M16)
        s = (s & _M16) + (s >> np.uint64(16))
        s = (s & _M16) + (s >> np.uint64(16))
        sl = self.slots[:k]
        sl["dst"], sl["sport"], sl["dport"], sl["seq"], sl["csum"] = dst, sport, dport, seq, ~s & _M16
        self.addr[:k] = dst


class _V4Policy:
    """An allow/block policy as IPv4 ranges, checked for whole arrays of addresses."""

    def __init__(self, policy: "TargetPolicy"):
        def ranges(nets):
            nets = [n for n in nets if n.version == 4]
            return (np.array([int(n.network_address) for n in nets], np.uint64),
                    np.array([int(n.broadcast_address) for n in nets], np.uint64))
        self.allow, self.block = ranges(policy.allow), ranges(policy.block)

    def allowed(self, dst: np.ndarray) -> np.ndarray:
        """Boolean mask: which of ``dst`` (uint64 IPv4 addresses) may be contacted."""
        d = dst[:, None]
        ok = ((d >= self.allow[0]) & (d <= self.allow[1])).any(axis=1)
        return ok & ~((d >= self.block[0]) & (d <= self.block[1])).any(axis=1)


# -- receiver process ------------------------------------------------------------------
#: A matched reply as the receiver hands it to the sender (``src``: 4 or 16 address bytes
#: per ``fam``; ``opts[:optlen]``: the TCP options).
_REPLY_DT = np.dtype([("idx", "<u8"), ("win", "<u2"), ("flags", "u1"), ("dl", "u1"), ("optlen", "u1"),
                      ("fam", "u1"), ("src", "u1", (16,)), ("opts", "u1", (40,))])
_TCP20, _OPT40 = np.arange(20), np.arange(40)


def _open_receivers() -> list[socket.socket]:
    socks = []
    for fam in (socket.AF_INET, socket.AF_INET6):
        s = socket.socket(fam, socket.SOCK_RAW, socket.IPPROTO_TCP)
        try:
            s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RCVBUF)
        except OSError:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
        s.setblocking(False)
        socks.append(s)
    return socks


class _RecvRing:
    """``n`` receive slots of ``SLOT`` bytes for ``recvmmsg(2)`` (IP + TCP headers fit)."""

    def __init__(self, sock: socket.socket, n: int = 1024):
        self.sock, self.n = sock, n
        self.buf = (ctypes.c_char * (SLOT * n))()
        self.iov = (_Iovec * n)()
        self.msgs = (_Mmsghdr * n)()
        base = ctypes.addressof(self.buf)
        for i in range(n):
            self.iov[i].base, self.iov[i].len = base + i * SLOT, SLOT
            self.msgs[i].hdr.iov, self.msgs[i].hdr.iovlen = ctypes.addressof(self.iov[i]), 1
        self.pkts = np.frombuffer(self.buf, np.uint8).reshape(n, SLOT)  # type: ignore[call-overload]  # ctypes arrays are buffers
        self.lens = np.frombuffer(self.msgs, np.uint32).reshape(n, ctypes.sizeof(_Mmsghdr) // 4)[:, _Mmsghdr.len.offset // 4]  # type: ignore[call-overload]  # (as above)

    def recv(self) -> int:
        """Packets read without blocking (0 if none)."""
        r = _libc.recvmmsg(self.sock.fileno(), self.msgs, self.n, MSG_DONTWAIT, None)
        return max(r, 0)


def _be(cols: np.ndarray) -> np.ndarray:
    """Big-endian unsigned integers from the byte columns of a (k, w) uint8 array."""
    v = np.zeros(len(cols), np.uint64)
    for j in range(cols.shape[1]):
        v = (v << np.uint64(8)) | cols[:, j]
    return v


def _match_v4(pkts: np.ndarray, lens: np.ndarray, seed: int, n: int, data_lens, seen: np.ndarray) -> np.ndarray:
    """Records of the IPv4 packets ``pkts`` (k, SLOT) that answer one of our probes and
    were not seen before (marks them in ``seen``)."""
    k = len(pkts)
    ihl = (pkts[:, 0] & 0x0F).astype(np.intp) * 4
    rows = np.arange(k)[:, None]
    tcp = pkts[rows, np.minimum(ihl[:, None] + _TCP20, SLOT - 1)]
    src, sport, dport = _be(pkts[:, 12:16]), _be(tcp[:, 0:2]), _be(tcp[:, 2:4])
    ack, flags = _be(tcp[:, 8:12]), tcp[:, 13]
    ok = (lens >= ihl + 20) & (pkts[:, 9] == 6) & (dport >= PORT_BASE) & (dport < PORT_BASE + PORT_RANGE)
    ok &= ((flags & FLAG_ACK) != 0) & ((flags & (FLAG_SYN | FLAG_RST)) != 0)
    h = keyed_hash_np(seed, src, sport)
    idx = np.zeros(k, np.uint64)
    dl = np.zeros(k, np.uint8)
    hit = np.zeros(k, bool)
    for d in data_lens:
        cand = (ack - np.uint64(1 + d) - h) & _M32N
        m = ok & ~hit & (cand < n) & (dport == np.uint64(PORT_BASE) + ((h >> _S32) + cand) % np.uint64(PORT_RANGE))
        idx[m], dl[m] = cand[m], d
        hit |= m
    r = np.flatnonzero(hit)
    _, first = np.unique(idx[r], return_index=True)
    r = r[first]
    r = r[seen[idx[r]] == 0]
    seen[idx[r]] = 1
    rec = np.zeros(len(r), _REPLY_DT)
    if len(r):
        doff = (tcp[r, 12] >> 4).astype(np.intp) * 4
        rec["idx"], rec["flags"], rec["dl"], rec["win"], rec["fam"] = idx[r], flags[r], dl[r], _be(tcp[r, 14:16]), 4
        rec["optlen"] = np.clip(np.minimum(doff, lens[r] - ihl[r]) - 20, 0, 40)
        rec["src"][:, :4] = pkts[r, 12:16]
        rec["opts"] = pkts[r[:, None], np.minimum(ihl[r, None] + 20 + _OPT40, SLOT - 1)]
    return rec


def _match_v6(s: socket.socket, buf: bytearray, seed: int, n: int, data_lens, seen) -> list[tuple]:
    """Rows of _REPLY_DT for the IPv6 packets waiting on ``s`` (rare: one at a time)."""
    rows: list[tuple] = []
    while True:
        try:
            nbytes, addr = s.recvfrom_into(buf)
        except BlockingIOError:
            return rows
        if nbytes < 20:
            continue
        src_b = socket.inet_pton(socket.AF_INET6, addr[0].split("%")[0])
        sport, dport, _seq, ack, offb, flags, win = struct.unpack_from("!HHIIBBH", buf, 0)
        if not PORT_BASE <= dport < PORT_BASE + PORT_RANGE or not flags & FLAG_ACK or not flags & (FLAG_SYN | FLAG_RST):
            continue
        h = keyed_hash(seed, int.from_bytes(src_b, "big"), sport)
        for dl in data_lens:
            idx = (ack - 1 - dl - h) & M32
            if idx < n and dport == PORT_BASE + ((h >> 32) + idx) % PORT_RANGE:
                if not seen[idx]:
                    seen[idx] = 1
                    opts = bytes(buf[20:min(nbytes, (offb >> 4) * 4)])[:40]
                    rows.append((idx, win, flags, dl, len(opts), 6, tuple(src_b), tuple(opts.ljust(40, b"\0"))))
                break


def _receiver_main(conn, socks, seed: int, n: int, data_len: int, stop) -> None:
    seen = np.zeros(n, np.uint8)
    out: list = []
    pending = 0
    last = time.monotonic()
    buf = bytearray(2048)
    v4, v6 = socks
    ring = _RecvRing(v4)
    data_lens = (0, data_len) if data_len else (0,)
    draining_since = None
    while True:
        ready, _, _ = select.select(socks, [], [], 0.02)
        if v4 in ready:
            while True:
                k = ring.recv()
                if k:
                    rec = _match_v4(ring.pkts[:k], ring.lens[:k].astype(np.intp), seed, n, data_lens, seen)
                    out.append(rec)
                    pending += len(rec)
                    if pending >= 4096:     # a busy socket never drains: hand over as we go
                        conn.send_bytes(np.concatenate(out).tobytes())
                        out, pending, last = [], 0, time.monotonic()
                if k < ring.n:
                    break
        if v6 in ready:
            rows = _match_v6(v6, buf, seed, n, data_lens, seen)
            out.append(np.array(rows, _REPLY_DT))
            pending += len(rows)
        now = time.monotonic()
        if pending and (pending >= 4096 or now - last > 0.05):
            conn.send_bytes(np.concatenate(out).tobytes())
            out, pending, last = [], 0, now
        if stop.is_set():
            # one more short pass after the stop request, then finish
            if draining_since is None:
                draining_since = now
            elif not ready or now - draining_since > 2.0:
                break
    if pending:
        conn.send_bytes(np.concatenate(out).tobytes())
    conn.send_bytes(b"")
    conn.close()


def _claimed_batches(counter, n: int, batch: int) -> Iterator[int]:
    """First target index of each batch this sender claims from the shared ``counter``
    (the next unclaimed batch number): a sender that runs faster sends more batches, and the
    send phase ends when the work, not the slowest sender's fixed share, is done."""
    while True:
        with counter.get_lock():
            k = counter.value
            counter.value = k + 1
        if k * batch >= n:
            return
        yield k * batch


def _sender_main(engine: "RawEngine", targets, seed: int, conn, part: int, counter, batch: int,
                 rate: float) -> None:
    """A forked sender: send the batches it claims on its own CPU, then report
    (probes sent, indices refused by the policy, {index: send error}) to the parent."""
    _libc.prctl(1, 9)       # PR_SET_PDEATHSIG = SIGKILL: never outlive the scan
    if os.getppid() == 1:
        os._exit(1)
    try:
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[part % len(cpus)]})
    except OSError:
        pass
    answered = bytearray(len(targets))
    errors: dict[int, str] = {}
    for _ in engine._send_part(targets, seed, None, answered, errors,
                               _claimed_batches(counter, len(targets), batch), batch, rate):
        pass
    conn.send((engine.sent, np.flatnonzero(np.frombuffer(answered, np.uint8) == 2).tolist(), errors))
    conn.close()


# -- the engine --------------------------------------------------------------------------
class RawEngine:
    """Send one SYN per target and yield what came back (see module docstring)."""

    def __init__(self, options: EngineOptions):
        self.opt = options
        self.sent = 0
        self.send_seconds = 0.0
        self._pending: list[np.ndarray] = []
        self._npending = 0
        self._eof = False

    def probe(self, targets: Sequence[RawTarget]) -> Iterator[tuple[int, Optional[RawReply], Optional[str]]]:
        """Yield (index, reply, None) for each matched reply, then (index, None, error) for
        send failures and refused targets and (index, None, None) for silence."""
        n = len(targets)
        if n == 0:
            return
        opt = self.opt
        seed = opt.seed & M64
        ctx = mp.get_context("fork")
        parent, child = ctx.Pipe(duplex=False)
        stop = ctx.Event()
        socks = _open_receivers()  # opened before any probe leaves
        proc = ctx.Process(target=_receiver_main, args=(child, socks, seed, n, len(opt.data), stop), daemon=True)
        proc.start()
        child.close()
        for s in socks:
            s.close()
        answered = bytearray(n)     # 1 = reply yielded, 2 = refused by the policy
        errors: dict[int, str] = {}
        self._pending, self._npending, self._eof = [], 0, False
        try:
            yield from self._send_all(targets, seed, parent, answered, errors)
            yield from self._flush(targets, answered)
            deadline = time.monotonic() + opt.cooldown
            while time.monotonic() < deadline:
                self._pull(parent, timeout=min(0.05, max(0.0, deadline - time.monotonic())))
                yield from self._flush(targets, answered)
            stop.set()
            while not self._eof:
                if not self._pull(parent, timeout=5.0) and not proc.is_alive():
                    break
                yield from self._flush(targets, answered)
        finally:
            stop.set()
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=1)
            parent.close()
        for i, err in errors.items():
            if not answered[i]:
                answered[i] = 1
                yield i, None, err
        for i in range(n):
            if answered[i] == 2:
                yield i, None, "blocked by policy"
            elif not answered[i]:
                yield i, None, None

    def _pull(self, conn, timeout: float = 0.0) -> bool:
        """Move what the receiver sent into the pending list; False if nothing came."""
        got = False
        while not self._eof and conn.poll(timeout):
            data = conn.recv_bytes()
            got, timeout = True, 0.0
            if not data:
                self._eof = True
                break
            rec = np.frombuffer(data, _REPLY_DT)
            self._pending.append(rec)
            self._npending += len(rec)
        return got

    def _flush(self, targets, answered) -> Iterator[tuple[int, RawReply, None]]:
        """Yield the pending replies whose source is the probed address."""
        pending, self._pending, self._npending = self._pending, [], 0
        packed = getattr(targets, "packed_v4", None)
        inet_ntoa, inet_ntop, AF6 = socket.inet_ntoa, socket.inet_ntop, socket.AF_INET6
        for rec in pending:
            opts = rec["opts"].tobytes()
            for j, (idx, win, flags, dl, optlen, fam, src) in enumerate(zip(
                    rec["idx"].tolist(), rec["win"].tolist(), rec["flags"].tolist(), rec["dl"].tolist(),
                    rec["optlen"].tolist(), rec["fam"].tolist(), rec["src"])):
                if answered[idx]:
                    continue
                if fam == 4:
                    src_b = src[:4].tobytes()
                    if packed is not None:
                        if packed(idx)[0] != src_b:
                            continue
                        src = inet_ntoa(src_b)
                    else:
                        src, a = inet_ntoa(src_b), targets[idx].address
                        if src != a and socket.inet_aton(a) != src_b:
                            continue
                else:
                    src_b = src.tobytes()
                    src = inet_ntop(AF6, src_b)
                    if socket.inet_pton(AF6, targets[idx].address) != src_b:
                        continue
                answered[idx] = 1
                yield idx, RawReply(idx, flags, dl, win, opts[j * 40:j * 40 + optlen], src), None

    @staticmethod
    def _v4_batch(targets, i0: int, i1: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[int]]:
        """(indices, IPv4 addresses, ports) of the cookie requests among targets[i0:i1] as
        uint64 arrays, and the indices of the other targets (IPv6, cookie-carrying)."""
        fast = getattr(targets, "v4_batch", None)
        if fast is not None:
            got = fast(i0, i1)
            if got is not None:
                return (*got, [])
        idx, dst, port, slow = [], [], [], []
        inet_aton = socket.inet_aton
        for i in range(i0, i1):
            t = targets[i]
            if t.cookie is None and ":" not in t.address:
                idx.append(i)
                dst.append(int.from_bytes(inet_aton(t.address), "big"))
                port.append(t.port)
            else:
                slow.append(i)
        return np.array(idx, np.uint64), np.array(dst, np.uint64), np.array(port, np.uint64), slow

    def _send_all(self, targets, seed, conn, answered, errors):
        """Send every probe (in this process, or in ``senders`` forked processes), moving
        replies from the receiver to the caller meanwhile."""
        opt = self.opt
        n = len(targets)
        senders = max(1, min(opt.senders, os.cpu_count() or 1))
        rate = opt.rate / senders
        # a batch goes out at once: at most 1 ms of the rate (>= 1 probe), so a paced scan
        # never bursts above its rate (batches of 16 broke rate_pps = 5 by 6 SYNs at once)
        batch = opt.batch or (1024 if rate <= 0 else int(min(1024, max(1, rate / 1000))))
        batch = min(batch, 1024)
        if senders == 1 or n < senders * batch:     # each sender gets at least one batch
            yield from self._send_part(targets, seed, conn, answered, errors, range(0, n, batch), batch, opt.rate)
            return
        ctx = mp.get_context("fork")
        start = time.monotonic()
        procs, conns = [], []
        counter = ctx.Value("q", 0)
        try:
            for part in range(senders):
                r, w = ctx.Pipe(duplex=False)
                p = ctx.Process(target=_sender_main, args=(self, targets, seed, w, part, counter, batch, rate),
                                daemon=True)
                p.start()
                w.close()
                procs.append(p)
                conns.append(r)
            waiting, sent = set(conns), 0
            while waiting:
                for c in mp.connection.wait(list(waiting), timeout=0.02):
                    waiting.discard(c)
                    try:
                        part_sent, refused, errs = c.recv()
                    except EOFError:
                        raise RuntimeError("a sender process died") from None
                    sent += part_sent
                    for i in refused:
                        answered[i] = 2
                    errors.update(errs)
                self._pull(conn)     # the caller gets replies after the sending (CPU for the senders)
                if self._npending >= MAX_PENDING:
                    yield from self._flush(targets, answered)
            self.sent = sent
        finally:
            self.send_seconds = time.monotonic() - start
            for p in procs:
                if p.is_alive():
                    p.kill()
                p.join(timeout=1)
            for c in conns:
                c.close()

    def _send_part(self, targets, seed, conn, answered, errors, starts, batch: int, rate: float):
        """Send the batches of ``batch`` targets beginning at the indices ``starts`` yields, at
        ``rate`` [probes/s] (0 = unpaced). ``conn`` None: a forked sender, which hands no
        replies over."""
        opt = self.opt
        n = len(targets)
        s4 = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        s6 = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_TCP)
        s6.setsockopt(socket.IPPROTO_IPV6, IPV6_CHECKSUM, 16)
        for s in (s4, s6):
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 8 << 20)
            except OSError:
                pass
        policy = _V4Policy(opt.policy) if opt.policy is not None else None
        b4 = _BatchSender(s4, socket.AF_INET, batch)
        b6 = _BatchSender(s6, socket.AF_INET6, batch)
        request_opts = syn_options(None, opt.experimental)
        ring: Optional[_V4Ring] = None
        templates: dict = {}
        src4 = None
        start = time.monotonic()
        sent = 0
        try:
            for i0 in starts:
                idx, dst, dport, slow = self._v4_batch(targets, i0, min(n, i0 + batch))
                if policy is not None and len(idx):
                    ok = policy.allowed(dst)
                    if not ok.all():
                        for i in idx[~ok].tolist():
                            answered[i] = 2
                        idx, dst, dport = idx[ok], dst[ok], dport[ok]
                if len(idx):
                    if ring is None:
                        src4 = src4 or source_address(socket.inet_ntoa(int(dst[0]).to_bytes(4, "big")))
                        ring = _V4Ring(s4, SynTemplate.ipv4(src4, 0, request_opts), batch)
                    for i, err in ring.send(seed, idx, dst, dport):
                        errors[i] = err
                    sent += len(idx)
                for i in slow:
                    t = targets[i]
                    if opt.policy is not None and not opt.policy.allowed(t.address):
                        answered[i] = 2
                        continue
                    if ":" not in t.address:
                        src4 = src4 or source_address(t.address)
                        self._fill_v4(b4, i, t, seed, src4, templates)
                    else:
                        self._fill_v6(b6, i, t, seed)
                for b in (b4, b6):
                    sent += b.fill
                    for i, err in b.flush():
                        errors[i] = err
                if conn is not None:
                    self._pull(conn)
                if rate > 0:
                    ahead = start + sent / rate - time.monotonic()
                    if ahead > 0:
                        if conn is not None:
                            yield from self._flush(targets, answered)   # idle time: hand replies over
                        ahead = start + sent / rate - time.monotonic()
                        if ahead > 0:
                            time.sleep(ahead)
                if conn is not None and self._npending >= MAX_PENDING:
                    yield from self._flush(targets, answered)
        finally:
            self.sent = sent
            self.send_seconds = time.monotonic() - start
            s4.close()
            s6.close()

    def _fill_v4(self, b4: _BatchSender, i: int, t: RawTarget, seed: int, src4: str, templates: dict) -> None:
        opt = self.opt
        dst_b = socket.inet_aton(t.address)
        dst = int.from_bytes(dst_b, "big")
        h = keyed_hash(seed, dst, t.port)
        key = (t.port, t.cookie)
        tpl = templates.get(key)
        if tpl is None:
            data = b"" if t.cookie is None else opt.data
            tpl = templates[key] = SynTemplate.ipv4(src4, t.port, syn_options(t.cookie, opt.experimental), data)
            if len(templates) > 4096:
                templates.clear()
        k = b4.fill
        tpl.fill(b4.pview, k * SLOT, dst, PORT_BASE + ((h >> 32) + i) % PORT_RANGE, (i + h) & M32)
        b4.iov[k].len = len(tpl.packet)
        struct.pack_into("!4s", b4.nview, k * 16 + 4, dst_b)
        b4.index[k] = i
        b4.fill += 1

    def _fill_v6(self, b6: _BatchSender, i: int, t: RawTarget, seed: int) -> None:
        opt = self.opt
        dst_b = socket.inet_pton(socket.AF_INET6, t.address)
        h = keyed_hash(seed, int.from_bytes(dst_b, "big"), t.port)
        opts = syn_options(t.cookie, opt.experimental)
        seg = tcp_segment(PORT_BASE + ((h >> 32) + i) % PORT_RANGE, t.port, (i + h) & M32, opts,
                          b"" if t.cookie is None else opt.data)
        k = b6.fill
        b6.pview[k * SLOT:k * SLOT + len(seg)] = seg
        b6.iov[k].len = len(seg)
        struct.pack_into("!16s", b6.nview, k * 28 + 8, dst_b)
        b6.index[k] = i
        b6.fill += 1


@dataclass(frozen=True)
class AddressRange:
    """A lazily computed target sequence: every address of ``network`` (``repeat`` times),
    on ``port``. Index i is address ``i mod size``; nothing is materialised."""

    network: str
    port: int
    repeat: int = 1
    if TYPE_CHECKING:   # set by __post_init__ (not fields: no part of init, repr or comparison)
        _net: ipaddress.IPv4Network | ipaddress.IPv6Network = field(init=False)
        _base: int = field(init=False)
        _size: int = field(init=False)

    def __post_init__(self):
        net = ipaddress.ip_network(self.network, strict=False)
        object.__setattr__(self, "_net", net)
        object.__setattr__(self, "_base", int(net.network_address))
        object.__setattr__(self, "_size", net.num_addresses)

    def __len__(self) -> int:
        return self._size * self.repeat

    def __getitem__(self, i: int) -> RawTarget:
        if not 0 <= i < len(self):
            raise IndexError(i)
        a = self._base + i % self._size
        if self._net.version == 4:
            return RawTarget(socket.inet_ntoa(a.to_bytes(4, "big")), self.port)
        return RawTarget(socket.inet_ntop(socket.AF_INET6, a.to_bytes(16, "big")), self.port)

    def v4_batch(self, i0: int, i1: int) -> Optional[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """(indices, addresses, ports) of targets i0..i1-1 as uint64 arrays; None for IPv6."""
        if self._net.version != 4:
            return None
        idx = np.arange(i0, i1, dtype=np.uint64)
        dst = np.uint64(self._base) + idx % np.uint64(self._size)
        return idx, dst, np.full(len(idx), self.port, np.uint64)

    @property
    def packed_v4(self):
        """Index -> (packed IPv4 address, port); None for IPv6."""
        if self._net.version != 4:
            return None
        base, size, port = self._base, self._size, self.port

        def packed(i: int) -> tuple[bytes, int]:
            return (base + i % size).to_bytes(4, "big"), port
        return packed
