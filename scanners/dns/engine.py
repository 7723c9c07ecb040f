"""The query engine: many DNS queries in flight over one UDP socket per address family.

* Prebuilt wire-format queries (``wire.build_query``); only the ID is patched per send.
* A congestion window per nameserver (slow start, then additive increase; halved on a
  timeout at most once per RTT), because servers drop queries beyond some number in
  flight (knot here: ~100) and a fixed window either wastes speed or loses answers.
* Retransmission timer per server from smoothed RTT (Jacobson/Karn: srtt + 4 rttvar,
  clamped to [min_rto, max_rto], doubled per retry).
* Optional per-nameserver rate limit (queries/s) and the global etiquette rate limit.
* TCP fallback when a UDP reply has the TC bit.
* Replies are matched on (server, port, ID, question); replies with another question are
  ignored (RFC 5452), unreadable ones resolve the query as 'malformed'.
"""
from __future__ import annotations

import asyncio
import ipaddress
import random
import socket
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
    """

    initial_rto: float = 0.5
    min_rto: float = 0.1
    max_rto: float = 2.0
    retries: int = 2
    window_initial: int = 64
    window_min: int = 4
    window_max: int = 512
    ns_qps: Optional[float] = None
    tcp_timeout: float = 3.0


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


class _Pending:
    __slots__ = ("fut", "question")

    def __init__(self, fut: asyncio.Future, question: bytes):
        self.fut = fut
        self.question = question


class _Server:
    """Per (address, port) state: window, RTT estimate, pacing, pending IDs."""

    __slots__ = ("inflight", "cwnd", "ssthresh", "srtt", "rttvar", "waiters", "next_send", "pending",
                 "last_cut")

    def __init__(self, window: float):
        self.inflight = 0
        self.cwnd = float(window)
        self.ssthresh = float("inf")
        self.srtt: Optional[float] = None
        self.rttvar = 0.0
        self.waiters: deque[asyncio.Future] = deque()
        self.next_send = 0.0
        self.pending: dict[int, _Pending] = {}
        self.last_cut = -1.0


class QueryEngine:
    """Send queries, get :class:`Exchange` results. Use inside a running event loop;
    ``await start()`` first and ``close()`` at the end."""

    def __init__(self, options: EngineOptions = EngineOptions(), limiter=None):
        self.o = options
        self.limiter = limiter
        self._servers: dict[tuple[str, int], _Server] = {}
        self._socks: dict[int, socket.socket] = {}
        self.stats = {"sent": 0, "replies": 0, "retransmits": 0, "timeouts": 0, "stray": 0,
                      "mismatched": 0, "tcp": 0, "window_cuts": 0}

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._loop = loop
        for fam, host in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
            try:
                sock = socket.socket(fam, socket.SOCK_DGRAM)
                if fam == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                for opt in (socket.SO_RCVBUF, socket.SO_SNDBUF):
                    sock.setsockopt(socket.SOL_SOCKET, opt, 4 << 20)
                sock.bind((host, 0))
                sock.setblocking(False)
            except OSError:
                continue  # e.g. no IPv6 on this host: v6 servers then fail as 'tcp-error'
            # Our own reader drains every queued datagram per wake-up (asyncio's datagram
            # transport reads one per event-loop iteration).
            loop.add_reader(sock.fileno(), self._drain, sock)
            self._socks[4 if fam == socket.AF_INET else 6] = sock

    def _drain(self, sock: socket.socket) -> None:
        recv = sock.recvfrom
        for _ in range(512):
            try:
                data, addr = recv(65535)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # e.g. ICMP errors reported on the socket
                continue
            self._received(data, addr[0], addr[1])

    def close(self) -> None:
        for sock in self._socks.values():
            try:
                self._loop.remove_reader(sock.fileno())
            except (AttributeError, ValueError, RuntimeError):
                pass
            sock.close()
        self._socks.clear()

    # ------------------------------------------------------------------ public
    async def query(self, server: str, port: int, wire: bytes) -> Exchange:
        """Send prebuilt query ``wire`` to ``server``:``port`` over UDP (TCP if truncated)."""
        st = self._servers.get((server, port))
        if st is None:
            norm = str(ipaddress.ip_address(server))  # the form replies come from
            st = self._servers.get((norm, port)) or _Server(self.o.window_initial)
            self._servers[(norm, port)] = self._servers[(server, port)] = st
            server = norm
        elif ":" in server:
            server = str(ipaddress.ip_address(server))
        if st.inflight < int(st.cwnd) and not st.waiters:
            st.inflight += 1
        else:
            await self._acquire(st)
        try:
            ex = await self._udp(st, server, port, wire)
            if ex.outcome == "reply" and ex.reply.tc:
                self.stats["tcp"] += 1
                tcp = await self._tcp(server, port, wire)
                return Exchange(server, port, tcp.outcome, tcp.reply, "tcp", True, ex.attempts + 1,
                                tcp.rtt_ms, tcp.error)
            return ex
        finally:
            self._release(st)

    # ------------------------------------------------------------------ window
    async def _acquire(self, st: _Server) -> None:
        while st.inflight >= int(st.cwnd):
            f = self._loop.create_future()
            st.waiters.append(f)
            await f
        st.inflight += 1

    def _release(self, st: _Server) -> None:
        st.inflight -= 1
        self._wake(st)

    def _wake(self, st: _Server) -> None:
        free = int(st.cwnd) - st.inflight
        while free > 0 and st.waiters:
            f = st.waiters.popleft()
            if not f.done():
                f.set_result(None)
                free -= 1

    def _on_reply(self, st: _Server, rtt: Optional[float]) -> None:
        if rtt is not None:  # Karn: only samples of first transmissions
            if st.srtt is None:
                st.srtt, st.rttvar = rtt, rtt / 2
            else:
                st.rttvar = 0.75 * st.rttvar + 0.25 * abs(st.srtt - rtt)
                st.srtt = 0.875 * st.srtt + 0.125 * rtt
        if st.cwnd < st.ssthresh:
            st.cwnd = min(self.o.window_max, st.cwnd + 1)
        else:
            st.cwnd = min(self.o.window_max, st.cwnd + 1 / st.cwnd)
        self._wake(st)

    def _on_loss(self, st: _Server) -> None:
        now = self._loop.time()
        if now - st.last_cut < (st.srtt or 0.0) + self.o.min_rto:
            return  # one cut per round trip
        st.last_cut = now
        st.ssthresh = max(self.o.window_min, st.cwnd / 2)
        st.cwnd = st.ssthresh
        self.stats["window_cuts"] += 1

    def _rto(self, st: _Server) -> float:
        if st.srtt is None:
            return self.o.initial_rto
        return min(self.o.max_rto, max(self.o.min_rto, st.srtt + 4 * st.rttvar))

    async def _pace(self, st: _Server) -> None:
        wait = 0.0
        if self.o.ns_qps:
            now = self._loop.time()
            start = max(now, st.next_send)
            st.next_send = start + 1.0 / self.o.ns_qps
            wait = start - now
        if self.limiter is not None:
            wait = max(wait, self.limiter.take_sync())
        if wait > 0:
            await asyncio.sleep(wait)

    # ------------------------------------------------------------------ UDP
    async def _udp(self, st: _Server, server: str, port: int, wire: bytes) -> Exchange:
        fam = 6 if ":" in server else 4
        sock = self._socks.get(fam)
        if sock is None:
            return Exchange(server, port, "tcp-error", error=f"no IPv{fam} socket")
        qid = random.getrandbits(16)
        while qid in st.pending:
            qid = random.getrandbits(16)
        packet = with_id(wire, qid)
        question = question_of(wire)
        loop = self._loop
        rto = self._rto(st)
        attempts = 0
        try:
            for attempt in range(self.o.retries + 1):
                fut = loop.create_future()
                st.pending[qid] = _Pending(fut, question)
                if self.o.ns_qps or self.limiter is not None:
                    await self._pace(st)
                t0 = loop.time()
                try:
                    sock.sendto(packet, (server, port))
                except (BlockingIOError, InterruptedError):
                    pass  # send buffer full: counts as a loss, the timer retransmits
                except OSError as exc:
                    return Exchange(server, port, "tcp-error", attempts=attempts, error=f"send: {exc}")
                attempts += 1
                self.stats["sent"] += 1
                timer = loop.call_later(rto, _expire, fut)
                data = await fut
                timer.cancel()
                if data is None:  # timer fired
                    self.stats["retransmits"] += 1
                    self._on_loss(st)
                    rto = min(self.o.max_rto, rto * 2)
                    continue
                rtt = loop.time() - t0
                self.stats["replies"] += 1
                self._on_reply(st, rtt if attempt == 0 else None)
                try:
                    reply = parse_reply(data)
                except MalformedReply as exc:
                    return Exchange(server, port, "malformed", attempts=attempts, rtt_ms=rtt * 1000,
                                    error=str(exc)[:200])
                return Exchange(server, port, "reply", reply, "udp", False, attempts, rtt * 1000)
            self.stats["timeouts"] += 1
            return Exchange(server, port, "timeout", attempts=attempts,
                            error=f"no reply after {attempts} datagrams")
        finally:
            st.pending.pop(qid, None)

    def _received(self, data: bytes, host: str, port: int) -> None:
        if len(data) < 2:
            self.stats["stray"] += 1
            return
        st = self._servers.get((host, port))
        p = st.pending.get((data[0] << 8) | data[1]) if st is not None else None
        if p is None or p.fut.done():
            self.stats["stray"] += 1
            return
        q = reply_question(data)
        if q and q != p.question:
            self.stats["mismatched"] += 1  # someone else's answer: keep waiting
            return
        p.fut.set_result(data)

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


def _expire(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)
