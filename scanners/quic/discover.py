"""The two hostname-level QUIC hints: the Alt-Svc header of an HTTPS response over TCP
(RFC 7838, ``h3=":443"``) and the ALPN list of the HTTPS DNS record (RFC 9460, type 65)."""
from __future__ import annotations

import asyncio
import re
import ssl
from typing import Optional

import dns.asyncresolver
import dns.exception
import dns.rdatatype
import dns.resolver

_ALT_H3 = re.compile(r'(?:^|,)\s*h3\s*=\s*"[^"]*"((?:\s*;\s*[a-z]+\s*=\s*[^,;]*)*)', re.I)
_MA = re.compile(r';\s*ma\s*=\s*"?(\d+)"?', re.I)
#: RFC 7838: an alternative without ``ma`` is fresh for 24 hours.
ALT_SVC_DEFAULT_MA_S = 86400
MAX_HEADER_BYTES = 65536


def parse_alt_svc(value: Optional[str]) -> tuple[bool, Optional[int]]:
    """(whether an h3 alternative is offered, its ``ma`` in s) for an Alt-Svc header value."""
    if not value:
        return False, None
    m = _ALT_H3.search(value)
    if not m:
        return False, None
    ma = _MA.search(m.group(1) or "")
    return True, int(ma.group(1)) if ma else ALT_SVC_DEFAULT_MA_S


async def fetch_alt_svc(hostname: str, address: str, port: int = 443, *, timeout_s: float = 3.0,
                        user_agent: str = "netsurvey") -> tuple[Optional[int], Optional[str], Optional[str]]:
    """HEAD / over HTTPS (HTTP/1.1, TLS certificate not verified) to ``address``.

    Returns (HTTP status, Alt-Svc value (several headers joined by ', '), error)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["http/1.1"])
    writer = None
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(address, port, ssl=ctx, server_hostname=hostname), timeout_s)
        writer.write(f"HEAD / HTTP/1.1\r\nHost: {hostname}\r\nUser-Agent: {user_agent}\r\n"
                     f"Connection: close\r\n\r\n".encode())
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout_s)
    except asyncio.IncompleteReadError:
        return None, None, "closed-before-headers"
    except asyncio.LimitOverrunError:
        return None, None, "headers-too-long"
    except asyncio.TimeoutError:
        return None, None, "timeout"
    except ConnectionRefusedError:
        return None, None, "refused"
    except (OSError, ssl.SSLError) as exc:
        return None, None, type(exc).__name__
    finally:
        if writer is not None:
            writer.close()
    lines = head.decode("latin-1").split("\r\n")
    try:
        status = int(lines[0].split()[1])
    except (IndexError, ValueError):
        return None, None, "bad-status-line"
    alt = [ln.split(":", 1)[1].strip() for ln in lines[1:] if ln.lower().startswith("alt-svc:")]
    return status, (", ".join(alt) if alt else None), None


async def https_record_alpn(resolver: dns.asyncresolver.Resolver, hostname: str
                            ) -> tuple[Optional[tuple[str, ...]], bool, Optional[str]]:
    """(ALPN ids of the first HTTPS record, no-default-alpn set, error). ALPN is None when
    there is no record; error is 'nxdomain', 'nodata', 'timeout', ... or None."""
    try:
        ans = await resolver.resolve(hostname, "HTTPS", search=False)
    except dns.resolver.NXDOMAIN:
        return None, False, "nxdomain"
    except dns.resolver.NoAnswer:
        return None, False, "nodata"
    except dns.exception.Timeout:
        return None, False, "timeout"
    except dns.exception.DNSException as exc:
        return None, False, type(exc).__name__
    for rd in sorted(ans, key=lambda r: r.priority):
        if rd.priority == 0:  # AliasMode
            continue
        alpn_param = rd.params.get(1)
        ids = tuple(i.decode("ascii", "replace") for i in alpn_param.ids) if alpn_param is not None else ()
        return ids, 2 in rd.params, None
    return None, False, "alias-only"
