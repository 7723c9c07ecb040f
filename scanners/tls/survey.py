"""The handshake survey (``netsurvey scan tls``): per hostname, address and version one full
handshake recording session ID, tickets (bytes, key_name, lifetime), certificate facts,
and optionally immediate resumption checks by ID and by ticket."""
from __future__ import annotations

import dataclasses
import datetime as dt
import ipaddress
from typing import Iterable, Optional

from netsurvey.scanning import Scanner, ScanOutcome, ScanStatus, ScanTarget
from netsurvey.selection import resolve_names
from netsurvey.writer import ResultWriter

from .engine import BAD_CERTIFICATE, certificate_facts, handshake, make_context
from .results import HandshakeObservation, TlsOptions, TlsSurveyResult
from .tls13 import KeyLog
from .wire import TicketLayout, infer_layout, key_id, ticket_layout


class TlsScanner(Scanner):
    """Handshake survey scanner (kind ``tls``)."""

    name = "tls"

    def init(self, options: TlsOptions, ctx) -> None:
        super().init(options, ctx)
        self.keylog = KeyLog()
        # (version, tickets offered, verifying): a host whose certificate fails verification
        # is measured regardless with the unverified contexts (issue 22; the thesis did not
        # abort on bad certificates), its verification result recorded
        self.contexts = {(v, t, ver): make_context(v, tickets=t, verify=ver, keylog=self.keylog)
                         for v in options.versions for t in (True, False) for ver in {options.verify, False}}

    async def scan(self, target: ScanTarget) -> ScanOutcome:
        box = [True]  # the run path paced this target's first connection
        obs = _same_key_family([await self._probe_version(target, v, box) for v in self.options.versions])
        best = next((o for o in obs if o.status == ScanStatus.SUCCESS.value), obs[0])
        return ScanOutcome(target, ScanStatus(best.status), TlsSurveyResult(tuple(obs)), best.error)

    async def _probe_version(self, t: ScanTarget, version: str, box: list) -> HandshakeObservation:
        assert t.address is not None   # targets come resolved (expand_targets)
        o = self.options
        verify = o.verify
        ctx = self.contexts[(version, True, verify)]
        h = await self._paced(box, t.address, t.port, t.hostname, ctx, timeout=o.timeout, keylog=self.keylog,
                            deadline=o.deadline)
        verified, cert_error = (True, None) if verify else (None, None)
        if verify and not h.ok and (h.error or "").startswith(BAD_CERTIFICATE):
            verified, cert_error, verify = False, h.error[len(BAD_CERTIFICATE):].strip(), False
            ctx = self.contexts[(version, True, False)]
            h = await self._paced(box, t.address, t.port, t.hostname, ctx, timeout=o.timeout, keylog=self.keylog,
                                deadline=o.deadline)
        if not h.ok:
            return HandshakeObservation(version, h.status.value, h.error,
                                        cert_verified=verified if cert_error else None, cert_error=cert_error)
        fp, issuer, sans = certificate_facts(h.cert_der)
        sid_len = len(h.session_id) if version == "1.2" and h.session_id is not None else None
        id_resumed = ticket_resumed = None
        note = h.session_error      # success, but resumption cannot be tried: say why
        seen = [ti.ticket for ti in h.tickets]       # every ticket of this probe, for the layout
        nonces = [ti.nonce_len for ti in h.tickets]  # TLS 1.3 ticket_nonce lengths (boringssl: 1)
        if o.check_resumption and note is None:
            if h.tickets and h.session is not None:
                r = await self._paced(box, t.address, t.port, t.hostname, ctx, timeout=o.timeout, session=h.session,
                                    keylog=self.keylog, read_tickets=True, deadline=o.deadline)
                # a resumption attempt that failed (timeout, reset) is no verdict: NULL, not
                # 'refused' (issue 24: JSSE's stalled connections read as 'no resumption')
                ticket_resumed = r.resumed if r.ok else None
                seen += [ti.ticket for ti in r.tickets] if r.ok else []
                nonces += [ti.nonce_len for ti in r.tickets] if r.ok else []
            if h.tickets and len(seen) < 2:
                # One ticket cannot tell a key name from a random IV (wire.infer_layout):
                # one more fresh handshake gives a second ticket under the same key.
                x = await self._paced(box, t.address, t.port, t.hostname, ctx, timeout=o.timeout,
                                    keylog=self.keylog, deadline=o.deadline)
                seen += [ti.ticket for ti in x.tickets] if x.ok else []
                nonces += [ti.nonce_len for ti in x.tickets] if x.ok else []
            lay = infer_layout(seen, nonces)
            if lay is not None and len(seen) == 2 and lay.key_id_len == 0 and all(ticket_layout(s).family == "openssl" for s in seen):
                # CBC-shaped tickets that differ from byte 0: a Go random IV, or an OpenSSL
                # key rotated between the two. A third ticket tells (the pair rule).
                x = await self._paced(box, t.address, t.port, t.hostname, ctx, timeout=o.timeout,
                                    keylog=self.keylog, deadline=o.deadline)
                seen += [ti.ticket for ti in x.tickets] if x.ok else []
                nonces += [ti.nonce_len for ti in x.tickets] if x.ok else []
            if version == "1.2":
                id_resumed, id_len = await self._check_id(t, version, box, verify)
                if id_len is not None:
                    sid_len = id_len
        return HandshakeObservation(
            version, h.status.value, note, h.negotiated, h.cipher, sid_len, tuple(h.tickets), fp, issuer, sans,
            id_resumed, ticket_resumed, h.handshake_ms, verified, cert_error, infer_layout(seen, nonces), tuple(seen))

    async def _check_id(self, t: ScanTarget, version: str, box: list,
                        verify: bool) -> tuple[Optional[bool], Optional[int]]:
        """Session-ID-only handshake (client offers no ticket) and one immediate resumption."""
        assert t.address is not None   # targets come resolved (expand_targets)
        ctx = self.contexts[(version, False, verify)]
        o = self.options
        a = await self._paced(box, t.address, t.port, t.hostname, ctx, timeout=o.timeout, deadline=o.deadline)
        if not a.ok:
            return None, None
        sid_len = len(a.session_id or b"")
        if a.session is None and sid_len:
            return None, sid_len        # session not exportable: resumption not tried
        if not sid_len:
            return False, sid_len
        b = await self._paced(box, t.address, t.port, t.hostname, ctx, timeout=o.timeout, session=a.session,
                            deadline=o.deadline)
        return (b.resumed if b.ok else None), sid_len

    async def _paced(self, box: list, address: str, *args, **kwargs):
        """One handshake; every connection after a target's first waits for the run's
        limiter too (the etiquette's rates count connections, not targets)."""
        kwargs.setdefault("request", self.options.tls13_request)
        if box[0]:
            box[0] = False
        else:
            await self.ctx.limiter.acquire(address)
        return await handshake(address, *args, **kwargs)

    def close(self) -> None:
        self.keylog.close()


def _same_key_family(obs: list[HandshakeObservation]) -> list[HandshakeObservation]:
    """A TLS 1.2 probe carries no ticket_nonce, so BoringSSL's openssl-shaped TLS 1.2 tickets
    read ``openssl``. Where such a probe's key id equals the key id of a ticket of the same
    target's ``boringssl`` probe (BoringSSL keeps one ticket key per SSL_CTX for both
    versions: ssl/ssl_session.cc ssl_ctx_rotate_ticket_encryption_key), it is the same
    ticketer: relabelled ``boringssl``."""
    bkeys = {key_id(t, o.layout) for o in obs if o.layout is not None and o.layout.family == "boringssl"
             for t in o.layout_tickets}
    bkeys.discard(None)
    if not bkeys:
        return obs
    out = []
    for o in obs:
        if o.layout is not None and o.layout.family == "openssl" and \
                any(key_id(t, o.layout) in bkeys for t in o.layout_tickets):
            o = dataclasses.replace(o, layout=TicketLayout("boringssl", o.layout.key_id_len, o.layout.basis))
        out.append(o)
    return out


# ---------------------------------------------------------------------------- targets

async def expand_targets(hosts: Iterable[tuple[Optional[int], str, Optional[str]]], port: int, ipv6: bool
                         ) -> tuple[list[ScanTarget], list[ScanOutcome]]:
    """(rank, hostname, fixed address or None) -> ScanTargets (one per resolved address: every
    A, and AAAA with ``ipv6``) and RESOLUTION_FAILED outcomes for names without addresses;
    the core's resolution (:func:`netsurvey.selection.resolve_names`), as ``scan tls``'s
    stream resolves its batches."""
    return await resolve_names([ScanTarget(h, a, port, r) for r, h, a in hosts], ipv6=ipv6)


# ---------------------------------------------------------------------------- storage

HANDSHAKE_COLUMNS = ["run_id", "rank", "hostname", "address", "port", "version", "status", "error",
                     "negotiated", "cipher", "session_id_len", "ticket_count", "ticket_lifetime",
                     "max_early_data", "ticket", "ticket_len", "key_name", "ticket_format", "cert_sha256",
                     "cert_issuer", "cert_sans", "id_resumed", "ticket_resumed", "handshake_ms", "observed_at",
                     "source", "cert_verified", "cert_error", "ticket_family", "ticket_key_id_len",
                     "ticket_layout_basis"]


def handshake_writer(db) -> ResultWriter:
    return ResultWriter(db, "tls_handshake", HANDSHAKE_COLUMNS,
                        types="catalog", batch_rows=2000)


def handshake_rows(run_id: int, outcome: ScanOutcome, versions: tuple[str, ...], source: str = "netsurvey"):
    """Rows for tls_handshake from one outcome (one per version; failures before any
    handshake — resolution, policy — give one row per version with that status)."""
    t = outcome.target
    addr = ipaddress.ip_address(t.address) if t.address else None
    now = dt.datetime.now(dt.timezone.utc)
    if outcome.result is None:
        for v in versions:
            yield (run_id, t.rank, t.hostname, addr, t.port, v, outcome.status.value, outcome.error,
                   None, None, None, 0, None, None, None, None, None, None, None, None, None, None, None, None,
                   now, source, None, None, None, None, None)
        return
    for o in outcome.result.observations:
        first = o.tickets[0] if o.tickets else None
        # key_name = the key id under the layout inferred from all the probe's tickets
        # (None where the layout has none, e.g. Go's random IV: no rotation is read from it)
        lay = o.layout if o.layout is not None else (infer_layout([first.ticket]) if first else None)
        yield (run_id, t.rank, t.hostname, addr, t.port, o.version, o.status, o.error, o.negotiated, o.cipher,
               o.session_id_len, len(o.tickets), first.lifetime if first else None,
               first.max_early_data if first else None, first.ticket if first else None,
               first.length if first else None, key_id(first.ticket, lay) if first else None,
               first.format if first else None, o.cert_sha256, o.cert_issuer,
               list(o.cert_sans) if o.cert_sha256 else None, o.id_resumed, o.ticket_resumed, o.handshake_ms,
               now, source, o.cert_verified, o.cert_error, lay.family if lay else None,
               lay.key_id_len if lay else None, lay.basis if lay else None)
