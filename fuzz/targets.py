"""Fuzz targets: every parser that reads bytes from the network or from files (issue 12).

Each target is a function ``f(data: bytes) -> None`` that feeds ``data`` to one parser and
checks its contract: the parser may fail only with the exception its docstring promises
(``EXPECTED``), and what it returns must satisfy simple invariants. Anything else raises
and is a finding. Targets import lazily, so a parser that does not exist yet (another
engineer's scanner still in progress) is reported as ``missing`` instead of failing.

Runner: ``python3 -m fuzz.run`` (atheris, coverage-guided) or ``make fuzz``; regression:
``tests/fuzz/test_fuzz_regressions.py`` replays every corpus and crash file through these
same functions.
"""
from __future__ import annotations

import io
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

FUZZ_DIR = Path(__file__).resolve().parent
CORPUS_DIR = FUZZ_DIR / "corpus"
CRASH_DIR = FUZZ_DIR / "crashes"


@dataclass(frozen=True)
class Target:
    """``module``: what has to be importable for the target to exist; ``max_len``: bytes
    per input (libFuzzer -max_len)."""

    name: str
    func: Callable[[bytes], None]
    module: str
    what: str
    max_len: int = 4096


class ContractViolation(AssertionError):
    """A parser returned something its contract rules out."""


def _check(cond: bool, msg: str) -> None:
    if not cond:
        raise ContractViolation(msg)


# ------------------------------------------------------------------------- network bytes
def tfo_options(data: bytes) -> None:
    from scanners.tfo.packets import parse_options

    data = data[:40]  # a TCP header holds at most 40 bytes of options
    p = parse_options(data)
    if p.cookie is not None:
        _check(len(p.cookie) <= 38, "cookie longer than a TCP option can hold")
    _check(p.tfo_kind in (None, "rfc7413", "experimental"), f"tfo_kind {p.tfo_kind!r}")


def tls_records(data: bytes) -> None:
    from scanners.tls import wire

    recs, rest = wire.split_records(data)
    _check(b"".join(r.header + r.payload for r in recs) + rest == data, "records + rest != input")
    wire.looks_like_tls(data)
    wire.parse_cleartext_flight(recs)
    wire.first_alert(recs)
    for _t, _body in wire.handshake_messages(data):
        pass
    wire.client_random(data)


def tls_ticket(data: bytes) -> None:
    from scanners.tls import wire

    for tls13 in (False, True):
        try:
            t = wire.parse_new_session_ticket(data, tls13)
        except ValueError:
            continue
        _check(len(t.ticket) <= 0xFFFF, "ticket longer than its 16-bit length allows")
    fmt = wire.ticket_format(data)
    _check(fmt in ("rfc5077", "rfc5077-openssl", "opaque"), fmt)
    kn = wire.key_name(data)
    _check(kn is None or len(kn) == 16, "key_name not 16 bytes")


def split_tickets(data: bytes) -> list[bytes]:
    """Fuzz input -> up to 4 tickets: [count][len16 ticket]... (what is left after the
    last complete one is dropped)."""
    if not data:
        return []
    out, i = [], 1
    for _ in range(data[0] % 5):
        if len(data) - i < 2:
            break
        n = int.from_bytes(data[i:i + 2], "big") % 1024
        out.append(data[i + 2:i + 2 + n])
        i += 2 + n
    return out


def tls_ticket_layout(data: bytes) -> None:
    from scanners.tls import wire

    tickets = split_tickets(data)
    for t in tickets:
        one = wire.ticket_layout(t)
        _check(one.family in wire.FAMILIES and one.basis == 1, f"bad single layout {one}")
        _check(one.key_id_len == wire.FAMILY_KEY_ID_BYTES[one.family], f"key id length {one}")
        if one.family == "gnutls":
            _check(len(t) == 16 + 16 + 2 + int.from_bytes(t[32:34], "big") + 20, "gnutls length field")
        kn = wire.key_name(t)
        _check(kn is None or (len(kn) == one.key_id_len and t.startswith(kn)), "key_name not the key id")
    lay = wire.infer_layout(tickets)
    nonempty = [t for t in tickets if t]
    _check((lay is None) == (not nonempty), "layout iff tickets")
    if lay is None:
        return
    _check(lay.family in wire.FAMILIES and lay.basis == len(nonempty), f"bad layout {lay}")
    _check(lay.key_id_len == wire.FAMILY_KEY_ID_BYTES[lay.family], f"key id length {lay}")
    ids = {wire.key_id(t, lay) for t in nonempty}
    _check(all(k is None or len(k) == lay.key_id_len for k in ids), "key id of the wrong length")
    if lay.basis >= 2 and lay.family in ("openssl", "rustls", "jsse"):
        _check(len(ids) < len(nonempty), "a key id inferred from a prefix that no two tickets share")
    # TLS 1.3 ticket_nonce lengths (issue 24, zoo 2): boringssl iff openssl-shaped with all
    # known nonces 1 byte; the nonces change nothing else
    nonces = [(None, 1, 8, 32)[t[-1] % 4] if t else None for t in tickets]
    lay_n = wire.infer_layout(tickets, nonces)
    known = [n for n in nonces if n is not None]
    want = "boringssl" if lay.family == "openssl" and known and all(n == 1 for n in known) else lay.family
    _check(lay_n.family == want and lay_n.basis == lay.basis and lay_n.key_id_len == lay.key_id_len,
           f"nonce rule {lay} -> {lay_n} ({nonces})")


def quic_token_layout(data: bytes) -> None:
    """NEW_TOKEN token layouts (scanners/quic/tokens.py, issue 24): 1-4 tokens (split as
    tls_ticket_layout splits tickets); the first byte of the input picks the address family."""
    from scanners.quic import tokens as tk

    fam = (None, False, True)[data[0] % 3] if data else None
    toks = split_tickets(data[1:])
    lays = []
    for t in toks:
        lay = tk.classify_token(t, fam)
        lays.append(lay)
        _check(lay.family in ("netsurvey-testbed", "ngtcp2", "ngtcp2-retry", "quic-go", "quinn", "unknown"),
               f"family {lay}")
        _check((lay.key_id_len is None) == (lay.family == "unknown"), f"key id length {lay}")
        plen = lay.key_prefix_len
        _check(plen is None or 0 <= plen <= len(t), f"key prefix {plen} of a {len(t)}-byte token")
        if lay.family == "quinn":
            _check(len(t) in ((tk.QUINN_LEN[fam],) if fam is not None else tuple(tk.QUINN_LEN.values()))
                   and plen == 0, f"quinn {lay} of {len(t)} bytes")
        if lay.family == "ngtcp2":
            _check(t[:1] == b"\x36" and len(t) >= tk.NGTCP2_REGULAR_LEN and plen == 0, f"ngtcp2 {lay}")
        if lay.family == "netsurvey-testbed":
            _check(t[:1] == b"\x01" and len(t) in (45, 57) and plen == 5, f"netsurvey {lay}")
    common = tk.common_key_prefix_len(lays)
    _check(common is None or (len({x.family for x in lays}) == 1 and common == lays[0].key_prefix_len),
           "common key prefix of mixed layouts")


def tls_certificate(data: bytes) -> None:
    from scanners.tls.engine import certificate_facts

    fp, issuer, sans = certificate_facts(data)
    _check((fp is None) == (not data), "fingerprint iff certificate bytes")


def dns_reply(data: bytes) -> None:
    from scanners.dns import wire

    try:
        r = wire.parse_reply(data)
    except wire.MalformedReply:
        r = None
    if r is not None:
        _check(len(r.qname) <= 255 * 4, "name longer than 255 octets (escaped)")
    wire.reply_question(data)


def quic_version_negotiation(data: bytes) -> None:
    from scanners.quic.vn import parse_version_negotiation

    dcid, scid = data[:8].ljust(8, b"\0"), data[8:16].ljust(8, b"\0")
    v = parse_version_negotiation(data[16:], dcid, scid)
    _check(v is None or (len(v) > 0 and all(0 <= x < 2**32 for x in v)), "versions")


def quic_packet_header(data: bytes) -> None:
    """aioquic's header parser, which the QUIC scanner's client runs on every datagram
    (Retry, Version Negotiation, wrong lengths)."""
    from aioquic.buffer import Buffer
    from aioquic.quic.packet import pull_quic_header

    try:
        pull_quic_header(Buffer(data=data), host_cid_length=8)
    except ValueError:
        pass


def quic_transport_parameters(data: bytes) -> None:
    from aioquic.buffer import Buffer
    from aioquic.quic.packet import pull_quic_transport_parameters

    try:
        pull_quic_transport_parameters(Buffer(data=data))
    except ValueError:
        pass


# ------------------------------------------------------------------------- files / APIs
def _json(data: bytes):
    return json.loads(data.decode("utf-8", "replace"))


def zgrab_json(data: bytes) -> None:
    """One zgrab2 output file (JSON lines) -> tls_handshake rows. A malformed file may
    only fail with ValueError (the CLI turns that into a one-line error)."""
    from scanners.tls.zgrab import rows_from_zgrab

    text = data.decode("utf-8", "replace")
    lines = text.splitlines()
    bad: list = []
    kept = list(rows_from_zgrab(lines, 1, bad))   # skipping mode: bad lines are collected
    _check(len(kept) + len(bad) == sum(1 for ln in lines if ln.strip()), "a line neither ingested nor reported")
    _check(all(1 <= b.line_no <= len(lines) and lines[b.line_no - 1].strip() for b in bad), "bad line number")
    try:
        rows = list(rows_from_zgrab(lines, 1))
    except ValueError:
        return
    for r in rows:
        _check(r[0] == 1, "run id")


def atlas_result_json(data: bytes) -> None:
    """One RIPE Atlas result object (from the API) -> observation rows (DNS or ping,
    chosen by the first byte). Nothing may escape: an unusable object is a failure row."""
    from atlas.parse import parse_dns, parse_ping

    if not data:
        return
    kind, body = data[0] & 1, data[1:]
    try:
        raw = _json(body)
    except ValueError:
        return
    if not isinstance(raw, dict):
        return
    rows = parse_dns(raw, 7) if kind == 0 else [parse_ping(raw, 7)]   # never raises: failures are rows
    for o in rows:
        _check(all(isinstance(v, int) and v >= 0 for v in (o.msm_id, o.prb_id, o.ts)), "row identity")
        _check(o.error is None or isinstance(o.error, str), "error text")


def target_list(data: bytes) -> None:
    """A user's rank,domain CSV: bad lines are counted, never raised."""
    import datetime as dt

    from netsurvey.targets import ImportReport, normalize_hostname, parse_lines

    text = data.decode("utf-8", "replace")
    report = ImportReport(None, "fuzz", dt.date(2026, 1, 1))
    good = list(parse_lines(io.StringIO(text), report))
    _check(len(good) + report.n_bad <= report.lines + 1, "more results than lines")
    for _no, rank, host in good:
        _check(rank > 0 and host == host.lower() and host.isascii() and len(host) <= 253, f"bad row {host!r}")
        _check(normalize_hostname(host) == host, "normalize_hostname not idempotent")


_TMP = Path(tempfile.gettempdir()) / f"netsurvey-fuzz-{os.getpid()}.toml"


def survey_config(data: bytes) -> None:
    """config/survey.toml: only UsageError (one line naming the file) may escape."""
    from netsurvey.config import load_config
    from netsurvey.errors import UsageError

    _TMP.write_bytes(data)
    try:
        load_config(_TMP)
    except UsageError as exc:
        _check("\n" not in str(exc) and str(_TMP) in str(exc), f"error not one line naming the file: {exc}")


def testbed_config(data: bytes) -> None:
    """config/testbed.toml: only UsageError may escape."""
    from netsurvey.errors import UsageError
    from testbed.model import load_testbed_config

    _TMP.write_bytes(data)
    try:
        load_testbed_config(_TMP)
    except UsageError as exc:
        _check("\n" not in str(exc) and str(_TMP) in str(exc), f"error not one line naming the file: {exc}")


def blocklist_file(data: bytes) -> None:
    """An etiquette blocklist file: only UsageError naming file and line."""
    from netsurvey.errors import UsageError
    from netsurvey.etiquette import read_network_file

    _TMP.write_bytes(data)
    try:
        read_network_file(_TMP)
    except UsageError as exc:
        _check("\n" not in str(exc) and str(exc).startswith(str(_TMP)), f"bad error: {exc}")


TARGETS: dict[str, Target] = {t.name: t for t in (
    Target("tfo_options", tfo_options, "scanners.tfo.packets", "TCP options of SYN-ACKs (TFO cookie)", 40),
    Target("tls_records", tls_records, "scanners.tls.wire", "TLS record splitting, cleartext server flight, alerts"),
    Target("tls_ticket", tls_ticket, "scanners.tls.wire", "NewSessionTicket (1.2/1.3), ticket format, key_name"),
    Target("tls_ticket_layout", tls_ticket_layout, "scanners.tls.wire",
           "ticket layout families and key id length over 1-4 tickets (the server zoo's implementations)"),
    Target("quic_token_layout", quic_token_layout, "scanners.quic.tokens",
           "QUIC NEW_TOKEN token layouts (netsurvey, ngtcp2, quic-go, quinn) over 1-4 tokens", 1024),
    Target("tls_certificate", tls_certificate, "scanners.tls.engine", "DER certificate -> fingerprint, issuer, SANs", 8192),
    Target("dns_reply", dns_reply, "scanners.dns.wire", "DNS replies (names, compression, RRs, EDNS/ECS)", 1500),
    Target("quic_version_negotiation", quic_version_negotiation, "scanners.quic.vn", "QUIC Version Negotiation", 1500),
    Target("quic_packet_header", quic_packet_header, "aioquic.quic.packet", "QUIC long/short headers, Retry (aioquic)", 1500),
    Target("quic_transport_parameters", quic_transport_parameters, "aioquic.quic.packet",
           "QUIC transport parameters (aioquic)", 1500),
    Target("zgrab_json", zgrab_json, "scanners.tls.zgrab", "zgrab2 JSON lines ingestion"),
    Target("atlas_result_json", atlas_result_json, "atlas.parse", "RIPE Atlas DNS/ping result JSON"),
    Target("target_list", target_list, "netsurvey.targets", "rank,domain target lists"),
    Target("survey_config", survey_config, "netsurvey.config", "config/survey.toml"),
    Target("testbed_config", testbed_config, "testbed.model", "config/testbed.toml"),
    Target("blocklist_file", blocklist_file, "netsurvey.etiquette", "etiquette blocklist files"),
)}


#: Findings reported to the owners and not fixed yet: (target, exception type name, innermost
#: project function "path:function"). The runner tolerates them so fuzzing goes on to find
#: other bugs; tests/fuzz/test_fuzz_regressions.py pins each with its crash input (strict xfail:
#: the test starts failing - remove the entry - once the owner fixes it).
KNOWN_FINDINGS: set[tuple[str, str, str]] = set()
# Fixed (issue 12 follow-up), each pinned by its input in fuzz/crashes/: zgrab_json
# KeyError/TypeError/AttributeError (scanners/tls/zgrab.py: bad lines are BadZgrabLine with
# line numbers); atlas_result_json ResultParseError/KeyError/TypeError/OverflowError/
# AttributeError (atlas/parse.py: 'malformed-result' failure rows); survey_config,
# testbed_config, blocklist_file UnicodeDecodeError (one-line UsageError naming file:line).


def where(exc: BaseException) -> str:
    """'path:function' of the innermost traceback frame inside the project (not fuzz/)."""
    import traceback

    root = str(FUZZ_DIR.parent) + "/"
    best = "?"
    for fr in traceback.extract_tb(exc.__traceback__):
        if fr.filename.startswith(root) and "/fuzz/" not in fr.filename:
            best = f"{fr.filename[len(root):]}:{fr.name}"
    return best


def finding_key(name: str, exc: BaseException) -> tuple[str, str, str]:
    """(target, exception type, file of the innermost project frame)."""
    return (name, type(exc).__name__, where(exc).split(":")[0])


def guarded(name: str) -> Callable[[bytes], None]:
    """The target with known (reported) findings tolerated."""
    func = TARGETS[name].func

    def run(data: bytes) -> None:
        try:
            func(data)
        except Exception as exc:  # noqa: BLE001
            if finding_key(name, exc) not in KNOWN_FINDINGS:
                raise
    return run


def available(t: Target) -> bool:
    import importlib

    try:
        importlib.import_module(t.module)
        return True
    except ImportError:
        return False
