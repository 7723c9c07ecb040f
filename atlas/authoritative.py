"""The instrumented authoritative server for the survey's own zone (thesis ch. 2.4.1: "we
control an authoritative nameserver for a subdomain ... and observe a DNS query for
exactly the random subdomain"): UDP and TCP on port 53, answers every name under the
zone with the querier's own address (A for IPv4 sources, AAAA for IPv6, TXT always), SOA
and NS at the apex, and logs every query (name, type, source, time, ECS) to
``atlas_auth_query``.

Answers carry TTL 0, so resolvers never answer a later probe from their cache.
"""
from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import ipaddress
import signal
import struct
from dataclasses import dataclass
from typing import Callable, Optional

import dns.edns
import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdatatype
import dns.rrset


@dataclass(frozen=True)
class AuthOptions:
    """:ivar zone: the zone served (e.g. ``dnstest.example.test``).
    :ivar listen: addresses to bind. :ivar port: UDP/TCP port (53).
    :ivar ns_name: name server host name in the apex NS/SOA (default ``ns.<zone>``).
    :ivar flush_s: seconds between database flushes of the query log."""

    zone: str
    listen: tuple[str, ...]
    port: int = 53
    ns_name: Optional[str] = None
    flush_s: float = 0.2


@dataclass(frozen=True)
class QueryRecord:
    """One received query. ``ecs_addr``/``ecs_source_prefix`` only if it carried ECS."""

    received_at: dt.datetime
    zone: str
    qname: str
    qtype: str
    proto: str
    src_addr: str
    src_port: int
    ecs_addr: Optional[str]
    ecs_source_prefix: Optional[int]
    rcode: str


def answer(zone: dns.name.Name, ns_name: dns.name.Name, wire: bytes, src: str) -> tuple[Optional[bytes], Optional[QueryRecord]]:
    """The response to one query from ``src`` and the log record (None, None if unparsable)."""
    try:
        q = dns.message.from_wire(wire)
    except Exception:  # noqa: BLE001 - garbage is dropped, as real servers do
        return None, None
    if not q.question:
        return None, None
    r = dns.message.make_response(q)
    r.flags |= dns.flags.AA
    r.flags &= ~dns.flags.RA
    qn = q.question[0].name
    qtype = q.question[0].rdtype
    ecs = next((o for o in q.options if isinstance(o, dns.edns.ECSOption)), None)
    if ecs is not None:
        r.use_edns(0, options=[dns.edns.ECSOption(ecs.address, ecs.srclen, 0)])
    ip = ipaddress.ip_address(src)
    if not qn.is_subdomain(zone):
        r.set_rcode(dns.rcode.REFUSED)
        r.flags &= ~dns.flags.AA
    elif qn == zone and qtype in (dns.rdatatype.SOA, dns.rdatatype.NS):
        if qtype == dns.rdatatype.SOA:
            r.answer.append(dns.rrset.from_text(zone, 0, "IN", "SOA",
                                                f"{ns_name} hostmaster.{zone} 1 3600 600 86400 0"))
        else:
            r.answer.append(dns.rrset.from_text(zone, 0, "IN", "NS", str(ns_name)))
    else:
        value = None
        if qtype == dns.rdatatype.A and ip.version == 4:
            value = str(ip)
        elif qtype == dns.rdatatype.AAAA and ip.version == 6:
            value = str(ip)
        elif qtype == dns.rdatatype.TXT:
            value = f'"{ip}"'
        if value:
            r.answer.append(dns.rrset.from_text(qn, 0, "IN", dns.rdatatype.to_text(qtype), value))
        else:  # NODATA: SOA in authority with TTL 0
            r.authority.append(dns.rrset.from_text(zone, 0, "IN", "SOA",
                                                   f"{ns_name} hostmaster.{zone} 1 3600 600 86400 0"))
    rec = QueryRecord(dt.datetime.now(dt.timezone.utc), zone.to_text(omit_final_dot=True),
                      qn.to_text(omit_final_dot=True).lower(), dns.rdatatype.to_text(qtype), "udp",
                      str(ip), 0, ecs.address if ecs else None, ecs.srclen if ecs else None,
                      dns.rcode.to_text(r.rcode()))
    return r.to_wire(), rec


class _Udp(asyncio.DatagramProtocol):
    def __init__(self, server: "AuthServer"):
        self.server = server

    def connection_made(self, transport):
        self.transport = transport

    def datagram_received(self, data, addr):
        out, rec = answer(self.server.zone, self.server.ns_name, data, addr[0])
        if out is None:
            return
        self.transport.sendto(out, addr)
        self.server.record(rec, "udp", addr[1])


class AuthServer:
    """Serves the zone on every listen address; ``sink`` gets each :class:`QueryRecord`."""

    def __init__(self, options: AuthOptions, sink: Callable[[QueryRecord], None]):
        self.o = options
        self.zone = dns.name.from_text(options.zone)
        self.ns_name = dns.name.from_text(options.ns_name or f"ns.{options.zone}")
        self.sink = sink
        self.queries = 0

    def record(self, rec: QueryRecord, proto: str, port: int) -> None:
        self.queries += 1
        self.sink(dataclasses.replace(rec, proto=proto, src_port=port))

    async def _tcp(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        try:
            while True:
                n = struct.unpack("!H", await reader.readexactly(2))[0]
                out, rec = answer(self.zone, self.ns_name, await reader.readexactly(n), peer[0])
                if out is None:
                    break
                writer.write(struct.pack("!H", len(out)) + out)
                await writer.drain()
                self.record(rec, "tcp", peer[1])
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def start(self) -> list:
        loop = asyncio.get_running_loop()
        handles = []
        for addr in self.o.listen:
            t, _ = await loop.create_datagram_endpoint(lambda: _Udp(self), local_addr=(addr, self.o.port))
            handles.append(t)
            handles.append(await asyncio.start_server(self._tcp, addr, self.o.port))
        return handles


async def serve_until_stopped(server: AuthServer, flush: Callable[[], None], flush_s: float,
                              max_seconds: Optional[float] = None,
                              ready: Callable[[], None] = lambda: None) -> None:
    """Run until SIGTERM/SIGINT (or ``max_seconds``), flushing the log every ``flush_s``."""
    handles = await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for s in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(s, stop.set)
    ready()
    t0 = loop.time()
    try:
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), flush_s)
            except asyncio.TimeoutError:
                pass
            flush()
            if max_seconds is not None and loop.time() - t0 >= max_seconds:
                break
    finally:
        for h in handles:
            h.close()
        flush()
