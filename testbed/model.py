"""The testbed's configuration model (`config/testbed.toml`), which is also its ground truth.

Everything a scanner can measure on the testbed is stated here; ``netsurvey testbed
status --json`` prints this model (plus what runs), and tests compare scanners' results
with it. Units: seconds for every duration, bytes for every length.

Address plan (only benchmarking ranges): the vantage namespace holds a bridge
``198.18.0.1/24`` / ``2001:2:0:ff::1/64``; each server namespace joins it with a veth
and owns the service prefixes listed under ``[[namespace]]``; service addresses are
bound on the namespace's ``lo`` (``local_ranges`` answer for a whole range).
"""
from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator

DEFAULT_TESTBED_CONFIG = Path(__file__).resolve().parent.parent / "config" / "testbed.toml"
ALLOWED_V4 = ipaddress.ip_network("198.18.0.0/15")
ALLOWED_V6 = ipaddress.ip_network("2001:2::/48")


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _check_addr(a: str) -> str:
    ip = ipaddress.ip_address(a)
    if ip not in (ALLOWED_V4 if ip.version == 4 else ALLOWED_V6):
        raise ValueError(f"{a} is outside the testbed ranges 198.18.0.0/15 and 2001:2::/48")
    return a


def _check_net(n: str) -> str:
    net = ipaddress.ip_network(n)
    if not net.subnet_of(ALLOWED_V4 if net.version == 4 else ALLOWED_V6):
        raise ValueError(f"{n} is outside the testbed ranges")
    return n


class Network(_M):
    """The vantage side of the shared link."""

    vantage_v4: str = "198.18.0.1"
    vantage_v6: str = "2001:2:0:ff::1"
    link_v4: str = "198.18.0.0/24"
    link_v6: str = "2001:2:0:ff::/64"
    #: Address the vantage's resolv.conf points at (the unbound resolver).
    resolver_v4: str = "198.18.1.1"
    resolver_v6: str = "2001:2:0:1::1"


class Namespace(_M):
    """A server network namespace. ``tfo_key`` (32 hex digits, or 'primary,backup') fixes
    net.ipv4.tcp_fastopen_key so TFO cookies are deterministic; all hosts in one namespace
    share it (a 'key group')."""

    name: str = Field(pattern=r"^[a-z][a-z0-9]{0,9}$")
    prefixes: list[str]
    #: Ranges answered entirely (ip route add local RANGE dev lo), e.g. a /16 for scale tests.
    local_ranges: list[str] = []
    tfo: bool = True
    tfo_key: str = ""

    @model_validator(mode="after")
    def _v(self):
        for n in [*self.prefixes, *self.local_ranges]:
            _check_net(n)
        return self


class Record(_M):
    """A plain DNS record set. ``values`` are addresses for A/AAAA, text for others."""

    name: str
    type: Literal["A", "AAAA", "CNAME", "TXT", "NS", "HTTPS", "MX"]
    values: list[str]
    ttl: int = Field(300, ge=0)


class EcsScope(_M):
    """An ECS-dependent answer (knot mod-geoip, subnet mode): a client in ``subnet`` gets
    ``address`` with scope prefix length = the subnet's prefix length."""

    subnet: str
    address: str


class EcsName(_M):
    name: str
    ttl: int = 60
    scopes: list[EcsScope]
    #: Answer for clients matching no subnet (scope 0).
    default: str


class LoadBalancedName(_M):
    """A name answered with one address drawn from ``pool`` per query (policy 'weighted':
    knot mod-geoip weighted mode, equal weights = uniform random)."""

    name: str
    pool: list[str]
    ttl: int = 1
    policy: Literal["weighted"] = "weighted"


class Dns(_M):
    authoritative_v4: str = "198.18.1.53"
    authoritative_v6: str = "2001:2:0:1::53"
    namespace: str = "dns"
    #: Zones served by knot; 'test' is the parent zone delegating the others.
    zones: list[str] = ["test", "example.test"]
    default_ttl: int = 300
    records: list[Record] = []
    ecs: list[EcsName] = []
    load_balanced: list[LoadBalancedName] = []


class TfoHost(_M):
    """Addresses of a plain TCP server (ports 80 and 443) in ``namespace``; TFO follows the
    namespace's ``tfo`` flag and key."""

    hostname: str
    namespace: str
    addresses: list[str]


class TlsHost(_M):
    """An nginx virtual host (SNI ``hostname``) in the web namespace.

    ``session_timeout`` (s) is nginx ssl_session_timeout: the session-cache lifetime and the
    ticket lifetime hint. ``ticket_key_group`` names a set of 80-byte key files shared by
    every host in the group (empty = a key of the host's own); ``share_group`` likewise
    names a session cache shared by every host in it (empty = its own cache);
    ``ticket_rotation`` (s, 0 = never) is how often the testbed rotates the group's key.
    """

    hostname: str
    addresses: list[str]
    versions: list[Literal["1.2", "1.3"]] = ["1.2", "1.3"]
    session_timeout: int = 300
    session_ids: bool = True
    tickets: bool = True
    ticket_key_group: str = ""
    share_group: str = ""
    sans: list[str] = []
    tfo: bool = False
    alt_svc_h3: bool = False

    @property
    def key_group(self) -> str:
        """Ticket-key group in effect: the configured one, else the host's own key."""
        return self.ticket_key_group or self.hostname


class TicketKeyGroup(_M):
    name: str
    rotation: int = 0  # seconds between rotations, 0 = never


class QuicHost(_M):
    """An aioquic server extended to issue NEW_TOKEN tokens."""

    hostname: str
    addresses: list[str]
    port: int = 443
    retry: bool = False
    issue_tokens: bool = True
    token_max_age: int = 600       # s: tokens older than this are refused
    token_key_rotation: int = 0    # s, 0 = never
    ticket_lifetime: int = 3600    # s
    ticket_key_rotation: int = 0   # s, 0 = never
    early_data: bool = True


class WebSite(_M):
    """A page served by nginx for browser probes; ``resources`` are absolute URLs it embeds."""

    hostname: str
    path: str = "/"
    resources: list[str] = []
    redirect_to: str = ""


class AtlasStandIn(_M):
    hostname: str = "atlas.test"
    address: str = "198.18.2.200"
    address_v6: str = "2001:2:0:2::200"
    fixtures_dir: str = "testbed/atlas_fixtures"


class Profile(_M):
    """A named link profile (issue 25): what the kernel's qdiscs add to a host class's link.

    ``rtt_ms`` is the round-trip time added (netem delay ``rtt_ms / 2`` on each direction of
    the link); ``jitter_ms`` is netem's jitter per direction; ``loss_pct`` netem's loss per
    direction; ``rate_kbit`` a tbf rate limit per direction (0 = unlimited). The profile
    'none' (all zero) removes every qdiscs the testbed added."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_-]{0,19}$")
    rtt_ms: float = Field(0.0, ge=0, le=5000)
    jitter_ms: float = Field(0.0, ge=0, le=1000)
    loss_pct: float = Field(0.0, ge=0, le=100)
    rate_kbit: int = Field(0, ge=0)
    description: str = ""

    @property
    def is_none(self) -> bool:
        return not (self.rtt_ms or self.jitter_ms or self.loss_pct or self.rate_kbit)


class Timing(_M):
    """The timing testbed (issue 25): a vantage and a server namespace of their own, joined
    by one veth, so delay profiles never touch the shared hosts. The server namespace runs
    a TCP server with TFO (port 80), nginx (TLS 1.2 + 1.3, session IDs, tickets, early data;
    port 443) and the QUIC server (UDP 443, tickets and 0-RTT). Host class 'timing'."""

    vantage_ns: str = Field("vantage", pattern=r"^[a-z][a-z0-9]{0,9}$")
    server_ns: str = Field("server", pattern=r"^[a-z][a-z0-9]{0,9}$")
    hostname: str = "timing.test"
    vantage_v4: str = "198.18.250.1"
    server_v4: str = "198.18.250.2"
    vantage_v6: str = "2001:2:0:250::1"
    server_v6: str = "2001:2:0:250::2"
    prefixlen_v4: int = 24
    prefixlen_v6: int = 64
    tfo_key: str = "d0d0d0d0-d1d1d1d1-d2d2d2d2-d3d3d3d3"
    session_timeout: int = 600   # s: nginx ssl_session_timeout and ticket lifetime hint
    max_early_data_bytes: int = 16384
    #: The tracking vantage (issue 25, item 4; testbed/trackline.py): namespace nstt-<track_ns>
    #: behind a second delay line into the shared testbed's vantage, so `browser track --profile
    #: P` reaches the shared *.track.test hosts with profile P's round trip (host class 'track').
    track_ns: str = Field("track", pattern=r"^[a-z][a-z0-9]{0,9}$")
    track_v4: str = "198.18.251.1"
    track_v6: str = "2001:2:0:251::1"

    @model_validator(mode="after")
    def _v(self):
        for a in (self.vantage_v4, self.server_v4, self.vantage_v6, self.server_v6, self.track_v4, self.track_v6):
            _check_addr(a)
        return self


class TestbedConfig(_M):
    network: Network = Network()
    namespaces: list[Namespace] = Field(alias="namespace")
    dns: Dns = Dns()
    tfo_hosts: list[TfoHost] = Field(default=[], alias="tfo_host")
    tls_hosts: list[TlsHost] = Field(default=[], alias="tls_host")
    ticket_key_groups: list[TicketKeyGroup] = Field(default=[], alias="ticket_key_group")
    quic_hosts: list[QuicHost] = Field(default=[], alias="quic_host")
    web: list[WebSite] = []
    atlas: Optional[AtlasStandIn] = None
    #: Namespace running nginx, the QUIC servers, the web pages and the Atlas stand-in.
    web_namespace: str = "web"
    #: Named link profiles (issue 25) and the one `testbed up` applies (to every host class).
    profiles: list[Profile] = Field(default=[Profile(name="none")], alias="profile")
    default_profile: str = "none"
    timing: Timing = Timing()

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="after")
    def _v(self):
        names = {n.name for n in self.namespaces}
        if "vantage" in names:
            raise ValueError("namespace name 'vantage' is reserved")
        for h in self.tfo_hosts:
            if h.namespace not in names:
                raise ValueError(f"tfo_host {h.hostname}: unknown namespace {h.namespace!r}")
        for a in self.all_addresses():
            _check_addr(a)
        pnames = [p.name for p in self.profiles]
        if len(set(pnames)) != len(pnames):
            raise ValueError("profile names must be unique")
        if self.default_profile not in pnames:
            raise ValueError(f"default_profile {self.default_profile!r} is not a [[profile]]")
        return self

    def profile(self, name: str) -> Profile:
        for p in self.profiles:
            if p.name == name:
                return p
        raise KeyError(name)

    def all_addresses(self) -> list[str]:
        out = [self.dns.authoritative_v4, self.dns.authoritative_v6,
               self.network.resolver_v4, self.network.resolver_v6]
        for h in [*self.tfo_hosts, *self.tls_hosts, *self.quic_hosts]:
            out += h.addresses
        for lb in self.dns.load_balanced:
            out += lb.pool
        return out

    def namespace(self, name: str) -> Namespace:
        for n in self.namespaces:
            if n.name == name:
                return n
        raise KeyError(name)

    def namespace_of(self, address: str) -> Namespace:
        ip = ipaddress.ip_address(address)
        for n in self.namespaces:
            for p in [*n.prefixes, *n.local_ranges]:
                if ip in ipaddress.ip_network(p):
                    return n
        raise KeyError(f"no namespace owns {address}")


def load_testbed_config(path: Optional[Path] = None) -> TestbedConfig:
    from netsurvey.config import load_toml_model

    return load_toml_model(Path(path or DEFAULT_TESTBED_CONFIG), TestbedConfig, "testbed config")


class ProfileError(RuntimeError):
    """A profile cannot be applied (unknown class, namespace absent, kernel lacks netem)."""
