"""Rows for the quic_* tables (schema/0004_quic.sql) through the shared ResultWriter.
Formatting for storage only; nothing here measures."""
from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from typing import Optional

from psycopg.types.json import Jsonb

from netsurvey.db import Database
from netsurvey.scanning import ScanOutcome
from netsurvey.writer import ResultWriter

from .records import DiscoveryResult, HandshakeResult
from .tokens import classify_token

TICKET_PREFIX_LEN = 16  # bytes kept as ticket_prefix

_DISCOVERY = ["run_id", "rank", "hostname", "address", "port", "status", "error", "probed_at", "vn_answer",
              "vn_versions", "vn_rtt_ms", "vn_reply_len", "alt_svc", "alt_svc_h3", "alt_svc_h3_ma_s",
              "https_status", "https_error", "https_rr_alpn", "https_rr_no_default_alpn", "https_rr_error"]
_CONNECTION = ["run_id", "conn_id", "rank", "hostname", "address", "port", "client_port", "purpose", "round",
               "status", "error", "started_at", "version", "alpn", "retry", "handshake_ms", "http_status",
               "presented_token_conn_id", "presented_token_len", "presented_token_age_s",
               "presented_ticket_conn_id", "presented_ticket_prefix", "presented_ticket_age_s",
               "presented_beyond_lifetime", "session_resumed", "early_data_sent", "early_data_accepted",
               "transport_parameters", "cert_sha256", "cert_subject", "cert_issuer", "cert_not_after",
               "cert_sans", "n_tokens", "n_tickets", "close_code", "close_reason"]
_TOKEN = ["run_id", "conn_id", "seq", "hostname", "address", "received_at", "after_handshake_ms", "token_len",
          "token", "token_format", "key_id_len"]
_TICKET = ["run_id", "conn_id", "seq", "hostname", "address", "received_at", "after_handshake_ms",
           "lifetime_s", "max_early_data", "ticket_len", "ticket", "ticket_prefix"]
TURNOVER_HOST = ["run_id", "rank", "hostname", "address", "every_s", "rounds", "observed_s", "connections_ok",
                 "retry_on_fresh", "tokens_issued", "token_lengths", "token_key_prefix_len", "token_keys_seen",
                 "token_key_changes", "token_key_period_s", "token_accept_max_age_s", "token_reject_min_age_s",
                 "tickets_issued", "ticket_lifetime_s", "ticket_max_early_data", "ticket_lengths",
                 "ticket_key_prefix_len", "ticket_keys_seen", "ticket_key_changes", "ticket_key_period_s",
                 "ticket_accept_max_age_s", "ticket_reject_min_age_s", "zero_rtt_accept_max_age_s",
                 "zero_rtt_reject_min_age_s", "token_format", "token_reuse_accepted", "ticket_reuse_accepted",
                 "token_presentations", "ticket_presentations"]
_EVENT = ["run_id", "hostname", "address", "port", "kind", "round", "grid_index", "event", "due_at", "at",
          "detail", "conn_id", "state"]


def _writer(db: Database, cols) -> ResultWriter:
    table = {id(_DISCOVERY): "quic_discovery", id(_CONNECTION): "quic_connection", id(_TOKEN): "quic_token",
             id(_TICKET): "quic_ticket", id(TURNOVER_HOST): "quic_turnover_host",
             id(_EVENT): "quic_turnover_event"}[id(cols)]
    return ResultWriter(db, table, cols, types="catalog", batch_rows=2000)


def _ip(a: Optional[str]):
    return ipaddress.ip_address(a) if a else None


@dataclass(frozen=True)
class Presented:
    """Provenance of the state a connection presented (for quic_connection)."""

    token_conn_id: Optional[int] = None
    token_age_s: Optional[float] = None
    ticket_conn_id: Optional[int] = None
    ticket_age_s: Optional[float] = None


class QuicStore:
    """Writers for one run. ``connection`` writes a connection and its tokens/tickets."""

    def __init__(self, db: Database, run_id: int):
        self.run_id = run_id
        self.discovery = _writer(db, _DISCOVERY)
        self.connections = _writer(db, _CONNECTION)
        self.tokens = _writer(db, _TOKEN)
        self.tickets = _writer(db, _TICKET)
        self.turnover = _writer(db, TURNOVER_HOST)
        self.events = _writer(db, _EVENT)
        from netsurvey import shard

        spec = shard.current()
        # shards of one run number their connections apart: shard i of N uses i+1, i+1+N, ...
        self._conn_step = spec.count if spec is not None else 1
        self._next_conn = (spec.index + 1 if spec is not None else 1) - self._conn_step

    def next_conn_id(self) -> int:
        """Connection number within the run, unique across the run's shards."""
        self._next_conn += self._conn_step
        return self._next_conn

    def write_discovery(self, o: ScanOutcome) -> None:
        t, r = o.target, o.result
        p = r.probe if isinstance(r, DiscoveryResult) else None
        self.discovery.write((
            self.run_id, t.rank, t.hostname, _ip(t.address), t.port, o.status.value, o.error,
            (r.probed_at if r is not None and r.probed_at else dt.datetime.now(dt.timezone.utc)),
            p.answer if p else None, list(p.versions) if p else None, p.rtt_ms if p else None,
            p.reply_len if p else None, r.alt_svc if r else None, r.alt_svc_h3 if r else None,
            r.alt_svc_h3_ma_s if r else None, r.https_status if r else None, r.https_error if r else None,
            list(r.https_rr_alpn) if r and r.https_rr_alpn is not None else None,
            r.https_rr_no_default_alpn if r else None, r.https_rr_error if r else None))

    def write_connection(self, conn_id: int, *, rank: Optional[int], purpose: str, round_no: Optional[int],
                         status: str, error: Optional[str], h: HandshakeResult,
                         presented: Presented = Presented()) -> None:
        c = h.certificate
        self.connections.write((
            self.run_id, conn_id, rank, h.hostname, _ip(h.address), h.port, h.client_port, purpose, round_no, status, error,
            h.started_at, h.version, h.alpn, h.retry, h.handshake_ms, h.http_status, presented.token_conn_id,
            h.presented_token_len, presented.token_age_s, presented.ticket_conn_id,
            h.presented_ticket[:TICKET_PREFIX_LEN] if h.presented_ticket else None, presented.ticket_age_s,
            h.presented_beyond_lifetime if h.presented_ticket else None, h.session_resumed, h.early_data_sent,
            h.early_data_accepted, Jsonb(h.transport_parameters) if h.transport_parameters else None,
            c.sha256 if c else None, c.subject if c else None, c.issuer if c else None,
            c.not_after if c else None, list(c.sans) if c else None, len(h.tokens), len(h.tickets),
            h.close_code, h.close_reason))
        v6 = ":" in h.address
        for i, tok in enumerate(h.tokens):
            lay = classify_token(tok.token, v6)
            self.tokens.write((self.run_id, conn_id, i, h.hostname, _ip(h.address), tok.received_at,
                               tok.after_handshake_ms, len(tok.token), tok.token, lay.family, lay.key_id_len))
        for i, tk in enumerate(h.tickets):
            self.tickets.write((self.run_id, conn_id, i, h.hostname, _ip(h.address), tk.received_at,
                                tk.after_handshake_ms, tk.lifetime_s, tk.max_early_data, len(tk.ticket),
                                tk.ticket, tk.ticket[:TICKET_PREFIX_LEN]))

    def write_turnover_host(self, row: tuple) -> None:
        self.turnover.write((self.run_id, *row))

    def write_event(self, hostname: Optional[str], address: str, port: int, kind: str, round_no: Optional[int],
                    grid_index: Optional[int], event: str, due_w: Optional[float], detail: Optional[str],
                    conn_id: Optional[int], state: Optional[bytes]) -> None:
        """One quic_turnover_event row (``due_w``: unix s)."""
        utc = dt.timezone.utc
        self.events.write((self.run_id, hostname, _ip(address), port, kind, round_no, grid_index, event,
                           dt.datetime.fromtimestamp(due_w, utc) if due_w is not None else None,
                           dt.datetime.now(utc), detail, conn_id, state))

    def continue_after(self, last_conn_id: int) -> None:
        """A resumed run: number new connections after the run's last one."""
        self._next_conn = max(self._next_conn, last_conn_id)

    def flush(self) -> None:
        for w in (self.discovery, self.connections, self.tokens, self.tickets, self.turnover, self.events):
            w.flush()

    def close(self) -> None:
        self.flush()
        for w in (self.discovery, self.connections, self.tokens, self.tickets, self.turnover, self.events):
            w.close()
