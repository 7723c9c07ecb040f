"""The one target builder: what the shared target options (``--list``, ``--top``,
``--target``, ``--port``, ``--ipv6``; :mod:`netsurvey.options`) select, as a stream of
:class:`~netsurvey.scanning.ScanTarget` items - (rank, name, explicit address or None,
port) - and, for the measurements that probe addresses, the same stream resolved batch by
batch while the scan reads it (:class:`~netsurvey.scanning.ResolvingStream`).

A measurement only declares its choices:

- how its ``--target`` values are spelled (:class:`TargetSpelling`: a name, HOST=ADDRESS
  or HOST@ADDRESS, a bare address, a port after an address), or that it takes none;
- its default port and address family (:class:`TargetSelection` ``port``, ``ipv6``);
- whether it needs a list or a target at all (``required``), whether its ``--target``
  entries come before the list's names (``targets_first``);
- which addresses of a name it probes: every one, or the first (``first``), and through
  which name servers.

Nothing here holds a list: the list's names are read with a server-side cursor
(:func:`netsurvey.targets.stream_targets`, counted in SQL), only the ``--target`` entries
are held.
"""
from __future__ import annotations

import asyncio
import ipaddress
from dataclasses import dataclass
from typing import Any, Iterable, Optional, Sequence

from .errors import UsageError
from .scanning import NameStream, ResolvingStream, ScanOutcome, ScanStatus, ScanTarget


@dataclass(frozen=True)
class TargetSpelling:
    """How a measurement's ``--target`` values are written. ``usage`` names them in the
    messages ("give --list NAME or at least one --target HOST[=ADDRESS]").

    - ``names``: ``HOST``, a DNS name the run resolves (normalised as a list's names are:
      lower case, IDNA, no trailing dot; an address written as a name, also ``[v6]``, is the
      name that resolves to itself);
    - ``pair``: ``"="`` for ``HOST=ADDRESS``, ``"@"`` for ``HOST@ADDRESS``, ``""`` for neither;
    - ``addresses``: ``ADDRESS`` alone (IPv6 may be in brackets), a target without a name;
    - ``ports``: ``:PORT`` after an address (an IPv6 one in brackets); without a default
      port (``port=None`` to :func:`parse_target`) the port must be given.
    """

    usage: str
    option: str = "--target"
    names: bool = True
    pair: str = ""
    addresses: bool = False
    ports: bool = False


def _bad(spelling: TargetSpelling, spec: str, why: str) -> UsageError:
    return UsageError(f"{spelling.option} {spec!r}: {why}")


def _address_port(text: str, spelling: TargetSpelling, spec: str, port: Optional[int]
                  ) -> tuple[Optional[str], Optional[int]]:
    """(canonical address, port) of ``ADDRESS``, ``[V6]`` and, with ports, ``V4:PORT`` /
    ``[V6]:PORT``; (None, None) if ``text`` is no address."""
    addr, port_s = text, None
    if spelling.ports:
        if text.startswith("[") and "]:" in text:
            addr, _, port_s = text[1:].partition("]:")
        elif text.count(":") == 1:
            addr, _, port_s = text.partition(":")
    try:
        bare = addr.strip()
        if port_s is None and bare.startswith("[") and bare.endswith("]"):
            bare = bare[1:-1]   # [V6] without a port; a lone bracket is no address
        canonical = str(ipaddress.ip_address(bare if port_s is None else addr))
    except ValueError:
        return None, None
    if port_s is not None:
        if not (port_s.isascii() and port_s.isdigit()) or not 0 < int(port_s) < 65536:
            raise _bad(spelling, spec, f"bad port {port_s!r}")
        return canonical, int(port_s)
    if port is None:
        raise _bad(spelling, spec, f"expected {spelling.usage}")
    return canonical, port


def _name(text: str, spelling: TargetSpelling, spec: str) -> str:
    """A name as the list's names are kept (an address literal as its canonical text)."""
    from .targets import normalize_hostname

    t = text.strip()
    try:
        return str(ipaddress.ip_address(t[1:-1] if t.startswith("[") and t.endswith("]") else t))
    except ValueError:
        pass
    try:
        return normalize_hostname(t)
    except ValueError as exc:
        raise _bad(spelling, spec, str(exc)) from None


def parse_target(spec: str, spelling: TargetSpelling, port: Optional[int]) -> ScanTarget:
    """One ``--target`` value as a :class:`ScanTarget` (no rank; an address only where one
    is written), read as ``spelling`` allows, ``port`` unless it names its own. UsageError
    with the value and the reason otherwise."""
    text = spec.strip()
    if spelling.pair and spelling.pair in text:
        host, _, rest = text.partition(spelling.pair)
        name = _name(host, spelling, spec)
        addr, p = _address_port(rest.strip(), spelling, spec, port)
        if addr is None:
            raise _bad(spelling, spec, f"{rest.strip()!r} is not an IP address")
        return ScanTarget(name, addr, p)  # type: ignore[arg-type]  # an address has a port
    if spelling.addresses:
        addr, p = _address_port(text, spelling, spec, port)
        if addr is not None:
            return ScanTarget(None, addr, p)  # type: ignore[arg-type]  # (as above)
    if spelling.names and port is not None:
        return ScanTarget(_name(text, spelling, spec), None, port)
    raise _bad(spelling, spec, f"expected {spelling.usage}")


@dataclass(frozen=True)
class TargetSelection:
    """The shared target options of one command: ``--list`` (``list_name``), ``--top``,
    ``--target`` (``targets``), ``--port`` and ``--ipv6``."""

    list_name: Optional[str] = None
    top: Optional[int] = None
    targets: tuple[str, ...] = ()
    port: int = 443
    ipv6: bool = True

    def items(self, spelling: Optional[TargetSpelling], *, required: bool = True,
              targets_first: bool = False, every_shard: bool = False) -> NameStream:
        """The selected targets, lazily: the list's names (ranks ascending, first ``top``,
        read from the database as the stream is read; in a shard only the shard's, unless
        ``every_shard``: a measurement that shares its work out otherwise, e.g. tls-shared's
        origins, each paired with every name) and the ``--target`` entries parsed by
        ``spelling`` (None: the command takes no --target), after the list's names or, with
        ``targets_first``, before them. ``len()`` counts the list in SQL. Bad options raise
        UsageError here, before any run is opened."""
        from .options import check_targets

        what = f"{spelling.option} {spelling.usage}" if spelling is not None else "--target HOST[=ADDRESS]"
        check_targets(self.list_name, self.top, self.targets, required=required, what=what)
        extra = [parse_target(spec, spelling, self.port) for spec in self.targets] if spelling is not None else []
        listed = None
        if self.list_name:
            from .clictx import list_db
            from .targets import stream_targets

            listed = stream_targets(list_db(), self.list_name, self.top, every_shard=every_shard)
        return NameStream(listed, self.port, extra, extra_first=targets_first)

    def resolving(self, spelling: Optional[TargetSpelling], *, first: bool = False,
                  nameservers: Optional[list[str]] = None, required: bool = True,
                  targets_first: bool = False) -> ResolvingStream:
        """:meth:`items` resolved batch by batch while the scan reads them (the names
        through ``nameservers``, None: the system resolver, checked here: a resolver off the
        machine is bad input before the run opens): every A address of a name (and AAAA
        with ``ipv6``), or with ``first`` only the first of them; a target with an address
        passes as it is. A name without an address goes to the stream's ``on_failed``."""
        names = self.items(spelling, required=required, targets_first=targets_first)
        if names.names is not None or any(t.address is None for t in names.extra):
            from .resolve import system_resolver

            system_resolver(nameservers)
        ipv6 = self.ipv6

        def resolve(batch: list[ScanTarget]) -> tuple[list[ScanTarget], list[ScanOutcome]]:
            return asyncio.run(resolve_names(batch, ipv6=ipv6, first=first, nameservers=nameservers))

        return ResolvingStream(names, resolve)


async def resolve_names(targets: Iterable[ScanTarget], *, ipv6: bool, first: bool = False,
                        nameservers: Optional[list[str]] = None
                        ) -> tuple[list[ScanTarget], list[ScanOutcome]]:
    """Targets -> (targets with an address, RESOLUTION_FAILED outcomes): a target with an
    address as it is; a name one target per A address (and AAAA with ``ipv6``), only the
    first with ``first``, each with the name's rank and port; in order. The one resolution
    of a selection's names (:meth:`TargetSelection.resolving`, and the measurements that
    resolve a whole list at once)."""
    from .resolve import resolve_many

    targets = list(targets)
    names = [t.hostname for t in targets if t.address is None]
    res = await resolve_many(names, ipv6=ipv6, nameservers=nameservers) if names else {}  # type: ignore[arg-type]  # no address: a name
    out: list[ScanTarget] = []
    failed: list[ScanOutcome] = []
    for t in targets:
        if t.address is not None:
            out.append(t)
            continue
        r = res[t.hostname]  # type: ignore[index]  # (as above)
        addrs = r.ipv4 + (r.ipv6 if ipv6 else ())
        if first:
            addrs = addrs[:1]
        if not addrs:
            failed.append(ScanOutcome(t, ScanStatus.RESOLUTION_FAILED, None, r.error or "no-address"))
        out += [ScanTarget(t.hostname, a, t.port, t.rank) for a in addrs]
    return out, failed


def resolved_list(stream: ResolvingStream) -> list[ScanTarget]:
    """A :meth:`TargetSelection.resolving` stream read whole, for the measurements that keep
    their targets together: in the order the stream gives them, a name without an address
    as a target with address None (before its batch's resolved targets, as the stream
    reports it)."""
    out: list[ScanTarget] = []
    stream.on_failed = lambda o: out.append(o.target)
    out.extend(stream)
    return out


def network_targets(cidr: str, port: int, *, zmap: bool, most: int, too_many: str,
                    most_with_zmap: bool = False) -> Any:
    """``--cidr NETWORK``: every address of it as a target without a name (at most
    ``most``, else UsageError ``too_many``; with ``zmap`` only if ``most_with_zmap``);
    with ``zmap`` the policy is checked here and the plan's view of the range is returned
    (:class:`~netsurvey.zmap.ZmapRange`: the probed addresses come from zmap later)."""
    try:
        net = ipaddress.ip_network(cidr, strict=False)
    except ValueError as exc:
        raise UsageError(f"--cidr: {exc}") from None
    if (most_with_zmap or not zmap) and net.num_addresses > most:
        raise UsageError(too_many)
    if zmap:
        from .clictx import state
        from .etiquette import TargetPolicy
        from .zmap import ZmapRange, check_discoverable

        check_discoverable(cidr, TargetPolicy.from_config(state.config.etiquette))
        return ZmapRange(cidr, port)
    return [ScanTarget(None, str(a), port) for a in net]


def responders(addresses: Sequence[str], port: int) -> list[ScanTarget]:
    """The addresses zmap found open (``--cidr --zmap``) as targets without a name."""
    return [ScanTarget(None, a, port) for a in addresses]
