"""The query engine: many DNS queries in flight over a few UDP sockets per address family.

* Prebuilt wire-format queries (``wire.build_query``); only the ID is patched per send.
* A congestion window per nameserver (slow start, then additive increase; cut to 3/4 on a
  timeout at most once per RTT), because servers drop queries beyond some number in
  flight (knot here: ~100 per socket receive buffer) and a fixed window either wastes
  speed or loses answers.
* Retransmission timer per server from smoothed RTT (Jacobson/Karn: srtt + 4 rttvar,
  clamped to [min_rto, max_rto], doubled per retry).
* Optional per-nameserver rate limit (queries/s) and the global etiquette rate limit.
* TCP fallback when a UDP reply has the TC bit.
* Replies are matched on (socket, server, port, ID, question); replies with another
  question are ignored (RFC 5452), unreadable ones resolve the query as 'malformed'.

Hot path (one future and one coroutine resumption per query): queries wait in a FIFO per
server; sends, retransmissions and window bookkeeping happen in callbacks (the socket
reader drains every queued datagram per wake-up and sends the next queued queries; one
timer walks a heap of retransmit deadlines), never in per-query coroutines or timers.
Several sockets (source ports) per family spread the load over a server's SO_REUSEPORT
workers and their receive buffers.
"""
from __future__ import annotations

import asyncio
import dataclasses
import heapq
import ipaddress
import itertools
import random
import socket
import time
from collections import deque
from dataclasses import dataclass
from typing import NamedTuple, Optional

from .wire import MalformedReply, Reply, parse_reply, question_of, reply_question, with_id


@dataclass(frozen=True)
class EngineOptions:
    """Tuning of the query engine. Times in seconds.

    :param initial_rto: retransmit timeout for a server without an RTT sample yet.
    :param min_rto: lower bound of the retransmit timeout.
    :param max_rto: upper bound of the retransmit timeout (after backoff too).
    :param retries: retransmissions after the first UDP send (so retries+1 sends).
    :param window_initial: queries in flight per nameserver at the start.
    :param window_min: smallest window after losses.
    :param window_max: largest window.
    :param ns_qps: queries per second per nameserver address (None = unlimited).
    :param tcp_timeout: connect + reply timeout of the TCP fallback.
    :param sockets: UDP sockets (source ports) per address family, used in turn.
    """

    initial_rto: float = 0.5
    min_rto: float = 0.1
    max_rto: float = 2.0
    retries: int = 2
    window_initial: int = 64
    window_min: int = 4
    window_max: int = 256
    ns_qps: Optional[float] = None
    tcp_timeout: float = 3.0
    sockets: int = 2

    def shared_by(self, processes: int) -> "EngineOptions":
        """The options of one of ``processes`` engines that may ask the same servers at
        once (the shards of a run): like the etiquette limits, each gets 1/N of the
        per-server rate and of the per-server window, so a server that drops queries
        beyond some number in flight sees no more than one engine would send."""
        if processes <= 1:
            return self
        return dataclasses.replace(
            self, ns_qps=self.ns_qps / processes if self.ns_qps else None,
            window_initial=max(self.window_min, self.window_initial // processes),
            window_max=max(self.window_min, self.window_max // processes))


class Exchange(NamedTuple):
    """Result of one query/reply exchange with one server (an immutable tuple).

    :param outcome: 'reply' (``reply`` set), 'timeout' (no reply after every retry),
        'malformed' (a reply that could not be parsed), 'tcp-error' (TCP fallback failed).
    :param transport: 'udp' or 'tcp' (the transport of the recorded reply).
    :param truncated: a UDP reply had TC set, so the query was repeated over TCP.
    :param attempts: datagrams sent (plus 1 for a TCP attempt).
    :param rtt_ms: milliseconds from the last send to the reply (None without reply).
    """

    server: str
    port: int
    outcome: str
    reply: Optional[Reply] = None
    transport: str = "udp"
    truncated: bool = False
    attempts: int = 0
    rtt_ms: Optional[float] = None
    error: Optional[str] = None


_QUEUED, _INFLIGHT, _DONE = 0, 1, 2
#: A server gets its own connected sockets after this many datagrams ...
CONNECT_AFTER = 64
#: ... while the engine holds fewer connected sockets than this (bounds open files).
CONNECTED_SOCKETS_MAX = 128


class _Query:
    """One query from ``query()`` until its future is resolved (bytes of the reply, None
    after the last timeout, or a str for a send error)."""

    __slots__ = ("fut", "st", "packet", "question", "sock", "conn", "qid", "sent", "attempts", "rto", "deadline",
                 "state", "rtt")
    # set when sent and on reply (see __init__); declared here for the type checker only
    sock: socket.socket
    conn: bool
    qid: int
    sent: float
    rto: float
    deadline: float
    rtt: float

    def __init__(self, fut: asyncio.Future, st: "_Server", wire: bytes):
        self.fut = fut
        self.st = st
        self.packet = wire
        self.question = question_of(wire)
        self.attempts = 0
        self.state = _QUEUED
        # set when sent: sock (conn: connected to the server), qid, rto (s), sent and deadline
        # (monotonic s); rtt (s) on reply


class _Server:
    """Per (address, port) state: window, RTT estimate, pacing, queued and pending queries."""

    __slots__ = ("host", "port", "addr", "socks", "connected", "sends", "inflight", "cwnd", "ssthresh", "srtt",
                 "rttvar", "queue", "next_send", "pending", "last_cut")

    def __init__(self, host: str, port: int, socks: Optional[list], window: float):
        self.host, self.port, self.addr = host, port, (host, port)
        self.socks = socks  # the shared sockets of its family (None: no socket of that family)
        self.connected = False  # socks are then this server's own connected sockets
        self.sends = 0
        self.inflight = 0
        self.cwnd = float(window)
        self.ssthresh = float("inf")
        self.srtt: Optional[float] = None
        self.rttvar = 0.0
        self.queue: deque[_Query] = deque()  # waiting for the window (or pacing)
        self.next_send = 0.0
        self.pending: dict[int, _Query] = {}  # in flight, by ID
        self.last_cut = -1.0


class QueryEngine:
    """Send queries, get :class:`Exchange` results. Use inside a running event loop;
    ``await start()`` first and ``close()`` at the end."""

    def __init__(self, options: EngineOptions = EngineOptions(), limiter=None):
        self.o = options
        self.limiter = limiter
        self._paced = bool(options.ns_qps) or limiter is not None
        self._servers: dict[tuple[str, int], _Server] = {}
        self._socks: dict[int, list[socket.socket]] = {}
        self._own: list[socket.socket] = []  # connected sockets of busy servers
        self._rr = 0  # round robin over the sockets of a family
        self._timers: list = []  # heap of (deadline, seq, _Query); stale entries skipped
        self._seq = itertools.count()
        self._tick_handle: Optional[asyncio.TimerHandle] = None
        self._tick_when = 0.0
        self.stats = {"sent": 0, "replies": 0, "retransmits": 0, "timeouts": 0, "stray": 0,
                      "mismatched": 0, "tcp": 0, "window_cuts": 0, "window_peak": 0}

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._loop = loop
        for fam, host in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
            socks = []
            for _ in range(max(1, self.o.sockets)):
                try:
                    sock = socket.socket(fam, socket.SOCK_DGRAM)
                    if fam == socket.AF_INET6:
                        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                    for opt in (socket.SO_RCVBUF, socket.SO_SNDBUF):
                        sock.setsockopt(socket.SOL_SOCKET, opt, 4 << 20)
                    sock.bind((host, 0))
                    sock.setblocking(False)
                except OSError:
                    break  # e.g. no IPv6 on this host: v6 servers then fail as 'tcp-error'
                # Our own reader drains every queued datagram per wake-up (asyncio's datagram
                # transport reads one per event-loop iteration).
                loop.add_reader(sock.fileno(), self._drain, sock)
                socks.append(sock)
            if socks:
                self._socks[4 if fam == socket.AF_INET else 6] = socks

    def close(self) -> None:
        for sock in [s for socks in self._socks.values() for s in socks] + self._own:
            try:
                self._loop.remove_reader(sock.fileno())
            except (AttributeError, ValueError, RuntimeError):
                pass
            sock.close()
        self._socks.clear()
        self._own.clear()
        if self._tick_handle is not None:
            self._tick_handle.cancel()
            self._tick_handle = None

    # ------------------------------------------------------------------ public
    async def query(self, server: str, port: int, wire: bytes) -> Exchange:
        """Send prebuilt query ``wire`` to ``server``:``port`` over UDP (TCP if truncated)."""
        st = self._servers.get((server, port)) or self._server(server, port)
        if st.socks is None:
            return Exchange(st.host, port, "tcp-error", error=f"no IPv{6 if ':' in st.host else 4} socket")
        q = _Query(self._loop.create_future(), st, wire)
        st.queue.append(q)
        if st.inflight < st.cwnd:
            self._pump(st)
        try:
            data = await q.fut
        finally:
            if q.state != _DONE:  # cancelled
                self._abandon(q)
        if data is None:
            return Exchange(st.host, port, "timeout", attempts=q.attempts,
                            error=f"no reply after {q.attempts} datagrams")
        if type(data) is str:
            return Exchange(st.host, port, "tcp-error", attempts=q.attempts, error=data)
        rtt_ms = q.rtt * 1000
        try:
            reply = parse_reply(data)
        except MalformedReply as exc:
            return Exchange(st.host, port, "malformed", attempts=q.attempts, rtt_ms=rtt_ms, error=str(exc)[:200])
        if reply.flags & 0x0200:  # TC
            self.stats["tcp"] += 1
            tcp = await self._tcp(st.host, port, wire)
            return Exchange(st.host, port, tcp.outcome, tcp.reply, "tcp", True, q.attempts + 1, tcp.rtt_ms, tcp.error)
        return Exchange(st.host, port, "reply", reply, "udp", False, q.attempts, rtt_ms)

    def _server(self, server: str, port: int) -> _Server:
        norm = str(ipaddress.ip_address(server))  # the form replies come from
        st = self._servers.get((norm, port))
        if st is None:
            st = _Server(norm, port, self._socks.get(6 if ":" in norm else 4), self.o.window_initial)
        self._servers[(norm, port)] = self._servers[(server, port)] = st
        return st

    # ------------------------------------------------------------------ sending
    def _pump(self, st: _Server) -> None:
        """Send queued queries while the window has room."""
        if not st.connected and st.sends >= CONNECT_AFTER and len(self._own) < CONNECTED_SOCKETS_MAX:
            self._connect(st)
        queue, pending, socks = st.queue, st.pending, st.socks
        getrandbits = random.getrandbits
        rto = self._rto(st)
        while queue and st.inflight < st.cwnd:
            q = queue.popleft()
            qid = getrandbits(16)
            while qid in pending:
                qid = getrandbits(16)
            q.qid = qid
            q.packet = with_id(q.packet, qid)
            self._rr = i = (self._rr + 1) % len(socks)  # type: ignore[arg-type]  # query(): a server without
            q.sock = socks[i]  # type: ignore[index]  # sockets is answered at once, never queued
            q.conn = st.connected
            q.rto = rto
            q.state = _INFLIGHT
            pending[qid] = q
            st.inflight += 1
            if self._paced:
                wait = self._pace_wait(st)
                if wait > 0:
                    self._loop.call_later(wait, self._send, q)
                    continue
            self._send(q)
        if st.inflight > self.stats["window_peak"]:
            self.stats["window_peak"] = st.inflight

    def _send(self, q: _Query) -> None:
        if q.state != _INFLIGHT:
            return  # cancelled while waiting for pacing
        try:
            if q.conn:
                q.sock.send(q.packet)
            else:
                q.sock.sendto(q.packet, q.st.addr)
        except (BlockingIOError, InterruptedError):
            pass  # send buffer full: counts as a loss, the timer retransmits
        except OSError as exc:
            self._finish(q, f"send: {exc}")
            return
        q.attempts += 1
        q.st.sends += 1
        self.stats["sent"] += 1
        q.sent = now = time.monotonic()
        q.deadline = deadline = now + q.rto
        heapq.heappush(self._timers, (deadline, next(self._seq), q))
        if self._tick_handle is None or deadline < self._tick_when - 0.002:
            self._arm(deadline)

    def _connect(self, st: _Server) -> None:
        """Give a busy server its own connected sockets: send() and recv() skip the address
        handling and route lookup of sendto()/recvfrom() (~2 us a query), and the kernel
        drops datagrams from anyone else."""
        own: list[socket.socket] = []
        fam = socket.AF_INET6 if ":" in st.host else socket.AF_INET
        for _ in range(max(1, self.o.sockets)):
            try:
                sock = socket.socket(fam, socket.SOCK_DGRAM)
                for opt in (socket.SO_RCVBUF, socket.SO_SNDBUF):
                    sock.setsockopt(socket.SOL_SOCKET, opt, 4 << 20)
                sock.setblocking(False)
                sock.connect(st.addr)
            except OSError:
                for o in own:
                    o.close()
                return  # keep the shared sockets
            own.append(sock)
        for sock in own:
            self._loop.add_reader(sock.fileno(), self._drain_own, sock, st)
        self._own += own
        st.socks, st.connected = own, True

    def _arm(self, when: float) -> None:
        if self._tick_handle is not None:
            self._tick_handle.cancel()
        self._tick_when = when
        self._tick_handle = self._loop.call_at(when, self._tick)

    def _tick(self) -> None:
        """Retransmit (or give up on) every query whose deadline has passed."""
        self._tick_handle = None
        now = time.monotonic()
        heap = self._timers
        while heap and heap[0][0] <= now:
            deadline, _, q = heapq.heappop(heap)
            if q.state != _INFLIGHT or q.deadline != deadline:
                continue  # answered or already resent
            st = q.st
            self._on_loss(st)
            if q.attempts > self.o.retries:
                self.stats["timeouts"] += 1
                self._finish(q, None)
                continue
            self.stats["retransmits"] += 1
            q.rto = min(self.o.max_rto, q.rto * 2)
            wait = self._pace_wait(st) if self._paced else 0.0
            if wait > 0:
                q.deadline = -1.0  # not in the heap until sent
                self._loop.call_later(wait, self._send, q)
            else:
                self._send(q)
        if heap and self._tick_handle is None:
            self._arm(max(heap[0][0], now + 0.001))

    def _pace_wait(self, st: _Server) -> float:
        """Seconds until the next send to ``st`` is allowed (takes the token now)."""
        wait = 0.0
        now = time.monotonic()
        if self.o.ns_qps:
            start = max(now, st.next_send)
            st.next_send = start + 1.0 / self.o.ns_qps
            wait = start - now
        if self.limiter is not None:   # global rate and etiquette.per_destination_pps
            wait = max(wait, self.limiter.take_sync(st.host))
        return wait

    def _finish(self, q: _Query, result, pump: bool = True) -> None:
        q.state = _DONE
        st = q.st
        st.pending.pop(q.qid, None)
        st.inflight -= 1
        if not q.fut.done():
            q.fut.set_result(result)
        if pump and st.queue:
            self._pump(st)

    def _abandon(self, q: _Query) -> None:
        if q.state == _QUEUED:
            try:
                q.st.queue.remove(q)
            except ValueError:
                pass
            q.state = _DONE
        elif q.state == _INFLIGHT:
            self._finish(q, None)

    # ------------------------------------------------------------------ window
    def _grow(self, st: _Server) -> None:
        """One more reply: slow start below ssthresh, then additive increase (+1 per window)."""
        if st.cwnd < st.ssthresh:
            st.cwnd = min(self.o.window_max, st.cwnd + 1)
        else:
            st.cwnd = min(self.o.window_max, st.cwnd + 1 / st.cwnd)

    def _on_loss(self, st: _Server) -> None:
        now = time.monotonic()
        if now - st.last_cut < (st.srtt or 0.0) + self.o.min_rto:
            return  # one cut per round trip
        st.last_cut = now
        st.ssthresh = max(self.o.window_min, st.cwnd * 0.75)
        st.cwnd = st.ssthresh
        self.stats["window_cuts"] += 1

    def _rto(self, st: _Server) -> float:
        if st.srtt is None:
            return self.o.initial_rto
        return min(self.o.max_rto, max(self.o.min_rto, st.srtt + 4 * st.rttvar))

    # ------------------------------------------------------------------ receiving
    def _drain(self, sock: socket.socket) -> None:
        recv = sock.recvfrom
        received = self._received
        for _ in range(512):
            try:
                data, addr = recv(65535)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # e.g. ICMP errors reported on the socket
                continue
            received(data, addr[0], addr[1], sock)

    def _received(self, data: bytes, host: str, port: int, sock: socket.socket) -> None:
        st = self._servers.get((host, port))
        if st is None:
            self.stats["stray"] += 1
            return
        self._match(st, data, sock)

    def _drain_own(self, sock: socket.socket, st: _Server) -> None:
        """Reader of a server's own socket: match every queued reply, then refill the
        window once for the whole batch."""
        recv = sock.recv
        match = self._match
        for _ in range(512):
            try:
                data = recv(65535)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:  # e.g. ICMP port unreachable
                continue
            match(st, data, sock, False)
        if st.queue:
            self._pump(st)

    def _match(self, st: _Server, data: bytes, sock: socket.socket, pump: bool = True) -> None:
        if len(data) < 12:
            self.stats["stray"] += 1
            return
        q = st.pending.get((data[0] << 8) | data[1])
        if q is None or q.sock is not sock or not q.attempts:  # not (yet) sent from there
            self.stats["stray"] += 1
            return
        question = q.question
        if data[12:12 + len(question)] != question:  # fast path: the question echoed as sent
            rq = reply_question(data)
            if rq and rq != question:
                self.stats["mismatched"] += 1  # someone else's answer: keep waiting
                return
        q.rtt = rtt = time.monotonic() - q.sent
        self.stats["replies"] += 1
        if q.attempts == 1:  # Karn: only samples of first transmissions
            if st.srtt is None:
                st.srtt, st.rttvar = rtt, rtt / 2
            else:
                st.rttvar = 0.75 * st.rttvar + 0.25 * abs(st.srtt - rtt)
                st.srtt = 0.875 * st.srtt + 0.125 * rtt
        self._grow(st)
        self._finish(q, data, pump)

    # ------------------------------------------------------------------ TCP
    async def _tcp(self, server: str, port: int, wire: bytes) -> Exchange:
        loop = self._loop
        t0 = loop.time()
        writer = None
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(server, port),
                                                    self.o.tcp_timeout)
            packet = with_id(wire, random.getrandbits(16))
            writer.write(len(packet).to_bytes(2, "big") + packet)
            await writer.drain()
            ln = int.from_bytes(await asyncio.wait_for(reader.readexactly(2), self.o.tcp_timeout), "big")
            data = await asyncio.wait_for(reader.readexactly(ln), self.o.tcp_timeout)
        except asyncio.TimeoutError:
            return Exchange(server, port, "timeout", transport="tcp", error="TCP timeout")
        except (OSError, asyncio.IncompleteReadError) as exc:
            return Exchange(server, port, "tcp-error", transport="tcp", error=f"TCP: {exc}"[:200])
        finally:
            if writer is not None:
                writer.close()
        rtt = (loop.time() - t0) * 1000
        try:
            reply = parse_reply(data)
        except MalformedReply as exc:
            return Exchange(server, port, "malformed", transport="tcp", rtt_ms=rtt, error=str(exc)[:200])
        if reply.id != int.from_bytes(packet[:2], "big"):
            return Exchange(server, port, "malformed", transport="tcp", rtt_ms=rtt, error="TCP reply ID mismatch")
        return Exchange(server, port, "reply", reply, "tcp", rtt_ms=rtt)
