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

_DISCOVERY = [
    ("run_id", "int8"), ("rank", "int4"), ("hostname", "text"), ("address", "inet"), ("port", "int4"),
    ("status", "text"), ("error", "text"), ("probed_at", "timestamptz"), ("vn_answer", "text"),
    ("vn_versions", "int8[]"), ("vn_rtt_ms", "float8"), ("vn_reply_len", "int4"), ("alt_svc", "text"),
    ("alt_svc_h3", "bool"), ("alt_svc_h3_ma_s", "int4"), ("https_status", "int4"), ("https_error", "text"),
    ("https_rr_alpn", "text[]"), ("https_rr_no_default_alpn", "bool"), ("https_rr_error", "text")]
_CONNECTION = [
    ("run_id", "int8"), ("conn_id", "int4"), ("rank", "int4"), ("hostname", "text"), ("address", "inet"),
    ("port", "int4"), ("client_port", "int4"), ("purpose", "text"), ("round", "int4"), ("status", "text"), ("error", "text"),
    ("started_at", "timestamptz"), ("version", "int8"), ("alpn", "text"), ("retry", "bool"),
    ("handshake_ms", "float8"), ("http_status", "int4"), ("presented_token_conn_id", "int4"),
    ("presented_token_len", "int4"), ("presented_token_age_s", "float8"), ("presented_ticket_conn_id", "int4"),
    ("presented_ticket_prefix", "bytea"), ("presented_ticket_age_s", "float8"),
    ("presented_beyond_lifetime", "bool"), ("session_resumed", "bool"), ("early_data_sent", "bool"),
    ("early_data_accepted", "bool"), ("transport_parameters", "jsonb"), ("cert_sha256", "text"),
    ("cert_subject", "text"), ("cert_issuer", "text"), ("cert_not_after", "timestamptz"),
    ("cert_sans", "text[]"), ("n_tokens", "int4"), ("n_tickets", "int4"), ("close_code", "int8"),
    ("close_reason", "text")]
_TOKEN = [("run_id", "int8"), ("conn_id", "int4"), ("seq", "int4"), ("hostname", "text"), ("address", "inet"),
          ("received_at", "timestamptz"), ("after_handshake_ms", "float8"), ("token_len", "int4"),
          ("token", "bytea"), ("token_format", "text"), ("key_id_len", "int4")]
_TICKET = [("run_id", "int8"), ("conn_id", "int4"), ("seq", "int4"), ("hostname", "text"), ("address", "inet"),
           ("received_at", "timestamptz"), ("after_handshake_ms", "float8"), ("lifetime_s", "int8"),
           ("max_early_data", "int8"), ("ticket_len", "int4"), ("ticket", "bytea"), ("ticket_prefix", "bytea")]
TURNOVER_HOST = [
    ("run_id", "int8"), ("rank", "int4"), ("hostname", "text"), ("address", "inet"), ("every_s", "float8"),
    ("rounds", "int4"), ("observed_s", "float8"), ("connections_ok", "int4"), ("retry_on_fresh", "bool"),
    ("tokens_issued", "bool"), ("token_lengths", "int4[]"), ("token_key_prefix_len", "int4"),
    ("token_keys_seen", "int4"), ("token_key_changes", "int4"), ("token_key_period_s", "float8"),
    ("token_accept_max_age_s", "float8"), ("token_reject_min_age_s", "float8"), ("tickets_issued", "bool"),
    ("ticket_lifetime_s", "int8"), ("ticket_max_early_data", "int8"), ("ticket_lengths", "int4[]"),
    ("ticket_key_prefix_len", "int4"), ("ticket_keys_seen", "int4"), ("ticket_key_changes", "int4"),
    ("ticket_key_period_s", "float8"), ("ticket_accept_max_age_s", "float8"), ("ticket_reject_min_age_s", "float8"),
    ("zero_rtt_accept_max_age_s", "float8"), ("zero_rtt_reject_min_age_s", "float8"), ("token_format", "text"),
    ("token_reuse_accepted", "bool"), ("ticket_reuse_accepted", "bool"), ("token_presentations", "int4"),
    ("ticket_presentations", "int4")]
_EVENT = [("run_id", "int8"), ("hostname", "text"), ("address", "inet"), ("port", "int4"), ("kind", "text"),
          ("round", "int4"), ("grid_index", "int4"), ("event", "text"), ("due_at", "timestamptz"),
          ("at", "timestamptz"), ("detail", "text"), ("conn_id", "int4"), ("state", "bytea")]


def _writer(db: Database, cols) -> ResultWriter:
    table = {id(_DISCOVERY): "quic_discovery", id(_CONNECTION): "quic_connection", id(_TOKEN): "quic_token",
             id(_TICKET): "quic_ticket", id(TURNOVER_HOST): "quic_turnover_host",
             id(_EVENT): "quic_turnover_event"}[id(cols)]
    return ResultWriter(db, table, [c for c, _ in cols], types=[t for _, t in cols], batch_rows=2000)


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
