"""A stateless, ZMap-style SYN engine for TFO probing.

* Sender: raw sockets (IPv4 with ``IP_HDRINCL``; IPv6 ``IPPROTO_TCP`` with the kernel
  computing the checksum), probes written into a fixed ring of slots from a prebuilt
  template and sent in batches with ``sendmmsg(2)`` (via ctypes); ``rate`` paces batches.
* Matching: no per-probe state. Probe ``i`` to (addr, port) carries
  ``seq = i + H(addr, port)`` and source port ``BASE + (H>>32 + i) mod RANGE`` where H is a
  keyed 64-bit hash with the run's seed; a reply is attributed to index
  ``ack - 1 - H(addr, port)`` (minus the SYN data length when data was sent) and accepted
  only if that index exists and the destination port matches too.
* Receiver: a separate process (no GIL sharing) reading raw ``IPPROTO_TCP`` sockets with a
  256 MiB receive buffer, sending matched replies to the sender in small batches.
* Memory: one byte per target (answered or not); targets are read by index from any
  sequence (a list, or a lazily computed address range), so 1M targets cost ~1 MB.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import ipaddress
import multiprocessing as mp
import select
import socket
import struct
import time
from dataclasses import dataclass
from typing import Iterator, Optional, Sequence

from .packets import FLAG_ACK, FLAG_RST, FLAG_SYN, SynTemplate, syn_options, tcp_segment

M32, M64 = 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF
#: Source ports used by probes: outside Linux's ephemeral range (32768-60999), so replies
#: never collide with the vantage's own connections.
PORT_BASE, PORT_RANGE = 61000, 4500
SO_RCVBUFFORCE = 33
IPV6_CHECKSUM = 7
RCVBUF = 256 << 20


@dataclass(frozen=True)
class RawTarget:
    """One probe: destination address (text), TCP port and, for a cookie-reuse probe,
    the Fast Open cookie to present (None = request a cookie)."""

    address: str
    port: int
    cookie: Optional[bytes] = None


@dataclass(frozen=True)
class RawReply:
    """A reply matched to probe ``index``: TCP ``flags``, ``acked_data`` = number of SYN
    data bytes the SYN-ACK acknowledges (0 or the probe's data length), the advertised
    ``window`` and the raw TCP ``options`` bytes; ``source`` is the reply's source address."""

    index: int
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
    run); ``batch``: probes per ``sendmmsg`` call; ``experimental``: request cookies with
    option 254/0xF989 instead of option 34; ``data``: payload of cookie-carrying SYNs."""

    rate: float = 0.0
    cooldown: float = 1.0
    seed: int = 0
    batch: int = 64
    experimental: bool = False
    data: bytes = b""


def keyed_hash(seed: int, addr: int, port: int) -> int:
    """Keyed 64-bit mix (splitmix64 finaliser) of (address, port)."""
    z = ((addr & M64) ^ (addr >> 64) ^ (port << 48) ^ seed) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    z ^= z >> 31
    return (z + seed * 0x9E3779B97F4A7C15) & M64


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
        failed, start = [], 0
        fd = self.sock.fileno()
        while start < self.fill:
            r = _libc.sendmmsg(fd, ctypes.byref(self.msgs, start * ctypes.sizeof(_Mmsghdr)),
                               self.fill - start, 0)
            if r < 0:
                e = ctypes.get_errno()
                if e in (errno.EINTR, errno.ENOBUFS, errno.EAGAIN):
                    time.sleep(0.0005)
                    continue
                failed.append((self.index[start], errno.errorcode.get(e, str(e))))
                start += 1
            else:
                start += r
        self.fill = 0
        return failed


# -- receiver process ------------------------------------------------------------------
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


def _receiver_main(conn, socks, seed: int, n: int, data_len: int, stop) -> None:
    seen = bytearray(n)
    out: list = []
    last = time.monotonic()
    buf = bytearray(2048)
    v4, v6 = socks
    data_lens = (0, data_len) if data_len else (0,)
    draining_since = None
    while True:
        ready, _, _ = select.select(socks, [], [], 0.02)
        for s in ready:
            is4 = s is v4
            while True:
                try:
                    nbytes, addr = s.recvfrom_into(buf)
                except BlockingIOError:
                    break
                if is4:
                    ihl = (buf[0] & 0x0F) * 4
                    src_b = bytes(buf[12:16])
                    a = int.from_bytes(src_b, "big")
                    t = ihl
                else:
                    src_b = socket.inet_pton(socket.AF_INET6, addr[0].split("%")[0])
                    a = int.from_bytes(src_b, "big")
                    t = 0
                if nbytes < t + 20:
                    continue
                sport, dport, _seq, ack, offb, flags, win = struct.unpack_from("!HHIIBBH", buf, t)
                if not PORT_BASE <= dport < PORT_BASE + PORT_RANGE or not flags & FLAG_ACK:
                    continue
                if not flags & (FLAG_SYN | FLAG_RST):
                    continue
                h = keyed_hash(seed, a, sport)
                for dl in data_lens:
                    idx = (ack - 1 - dl - h) & M32
                    if idx < n and dport == PORT_BASE + ((h >> 32) + idx) % PORT_RANGE:
                        if not seen[idx]:
                            seen[idx] = 1
                            doff = (offb >> 4) * 4
                            out.append((idx, flags, dl, win, bytes(buf[t + 20:t + doff]), src_b))
                        break
        now = time.monotonic()
        if out and (len(out) >= 2048 or now - last > 0.05):
            conn.send(out)
            out = []
            last = now
        if stop.is_set():
            # one more short pass after the stop request, then finish
            if draining_since is None:
                draining_since = now
            elif not ready or now - draining_since > 2.0:
                break
    if out:
        conn.send(out)
    conn.send(None)
    conn.close()


# -- the engine --------------------------------------------------------------------------
class RawEngine:
    """Send one SYN per target and yield what came back (see module docstring)."""

    def __init__(self, options: EngineOptions):
        self.opt = options
        self.sent = 0
        self.send_seconds = 0.0

    def probe(self, targets: Sequence[RawTarget]) -> Iterator[tuple[int, Optional[RawReply], Optional[str]]]:
        """Yield (index, reply, None) for each matched reply as it arrives, then
        (index, None, error) for send failures and (index, None, None) for silence."""
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
        answered = bytearray(n)
        errors: dict[int, str] = {}
        try:
            yield from self._send_all(targets, seed, parent, answered, errors)
            deadline = time.monotonic() + opt.cooldown
            while time.monotonic() < deadline:
                yield from self._drain(parent, targets, answered, timeout=min(0.05, max(0.0, deadline - time.monotonic())))
            stop.set()
            done = False
            while not done:
                if parent.poll(5.0):
                    batch = parent.recv()
                    if batch is None:
                        done = True
                    else:
                        yield from self._accept(batch, targets, answered)
                elif not proc.is_alive():
                    break
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
            if not answered[i]:
                yield i, None, None

    def _accept(self, batch, targets, answered) -> Iterator[tuple[int, RawReply, None]]:
        for idx, flags, dl, win, opts, src_b in batch:
            if answered[idx]:
                continue
            t = targets[idx]
            if len(src_b) == 4:
                src = socket.inet_ntoa(src_b)
                if src != t.address and socket.inet_aton(t.address) != src_b:
                    continue
            else:
                src = socket.inet_ntop(socket.AF_INET6, src_b)
                if socket.inet_pton(socket.AF_INET6, t.address) != src_b:
                    continue
            answered[idx] = 1
            yield idx, RawReply(idx, flags, dl, win, opts, src), None

    def _drain(self, conn, targets, answered, timeout: float = 0.0):
        while conn.poll(timeout):
            batch = conn.recv()
            if batch is None:
                return
            yield from self._accept(batch, targets, answered)
            timeout = 0.0

    def _send_all(self, targets, seed, conn, answered, errors):
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
        b4 = _BatchSender(s4, socket.AF_INET, opt.batch)
        b6 = _BatchSender(s6, socket.AF_INET6, opt.batch)
        request_opts = syn_options(None, opt.experimental)
        templates: dict = {}
        src4 = None
        inet_aton, inet_pton, AF6 = socket.inet_aton, socket.inet_pton, socket.AF_INET6
        pack_into = struct.pack_into
        start = time.monotonic()
        rate = opt.rate
        sent = 0
        last_drain = start
        try:
            packed = getattr(targets, "packed_v4", None)
            for i in range(n):
                if packed is not None:
                    dst_b, tport = packed(i)
                    t = None
                    a = "0"
                else:
                    t = targets[i]
                    a = t.address
                    tport = t.port
                if ":" not in a:
                    if t is not None:
                        dst_b = inet_aton(a)
                    dst = int.from_bytes(dst_b, "big")
                    h = keyed_hash(seed, dst, tport)
                    sport = PORT_BASE + ((h >> 32) + i) % PORT_RANGE
                    seq = (i + h) & M32
                    if src4 is None:
                        src4 = source_address(socket.inet_ntoa(dst_b))
                    cookie = t.cookie if t is not None else None
                    key = (tport, cookie)
                    tpl = templates.get(key)
                    if tpl is None:
                        opts = request_opts if cookie is None else syn_options(cookie, opt.experimental)
                        data = b"" if cookie is None else opt.data
                        tpl = templates[key] = SynTemplate.ipv4(src4, tport, opts, data)
                        if len(templates) > 4096:
                            templates.clear()
                    k = b4.fill
                    tpl.fill(b4.pview, k * SLOT, dst, sport, seq)
                    b4.iov[k].len = len(tpl.packet)
                    pack_into("!4s", b4.nview, k * 16 + 4, dst_b)
                    b4.index[k] = i
                    b4.fill += 1
                    full = b4 if b4.fill == b4.n else None
                else:
                    dst_b = inet_pton(AF6, a)
                    dst = int.from_bytes(dst_b, "big")
                    h = keyed_hash(seed, dst, t.port)
                    sport = PORT_BASE + ((h >> 32) + i) % PORT_RANGE
                    seq = (i + h) & M32
                    opts = request_opts if t.cookie is None else syn_options(t.cookie, opt.experimental)
                    seg = tcp_segment(sport, t.port, seq, opts, b"" if t.cookie is None else opt.data)
                    k = b6.fill
                    b6.pview[k * SLOT:k * SLOT + len(seg)] = seg
                    b6.iov[k].len = len(seg)
                    pack_into("!16s", b6.nview, k * 28 + 8, dst_b)
                    b6.index[k] = i
                    b6.fill += 1
                    full = b6 if b6.fill == b6.n else None
                if full is not None:
                    sent += full.fill
                    for idx, err in full.flush():
                        errors[idx] = err
                    if rate > 0:
                        ahead = start + sent / rate - time.monotonic()
                        if ahead > 0:
                            time.sleep(ahead)
                    now = time.monotonic()
                    if now - last_drain > 0.05:
                        last_drain = now
                        yield from self._drain(conn, targets, answered)
            for b in (b4, b6):
                sent += b.fill
                for idx, err in b.flush():
                    errors[idx] = err
        finally:
            self.sent = sent
            self.send_seconds = time.monotonic() - start
            s4.close()
            s6.close()


@dataclass(frozen=True)
class AddressRange:
    """A lazily computed target sequence: every address of ``network`` (``repeat`` times),
    on ``port``. Index i is address ``i mod size``; nothing is materialised."""

    network: str
    port: int
    repeat: int = 1

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

    @property
    def packed_v4(self):
        """Fast path for the sender: index -> (packed IPv4 address, port); None for IPv6."""
        if self._net.version != 4:
            return None
        base, size, port = self._base, self._size, self.port

        def packed(i: int) -> tuple[bytes, int]:
            return (base + i % size).to_bytes(4, "big"), port
        return packed
