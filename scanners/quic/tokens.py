"""NEW_TOKEN token layouts of known QUIC servers (issue 24: token parsing that does not
assume our own server's format).

A token is opaque to the client (RFC 9000 section 8.1.3); some servers' tokens still show a
fixed structure, and knowing it keeps quic-turnover from reading a constant *format* byte
as a key identifier (ngtcp2's 0x36 magic looked like a 1-byte key id that never rotates),
or from missing a real key id. Recognised, each from the implementation's own source:

- ``netsurvey-testbed``: the testbed's aioquic server (testbed/quic_server.py): ``0x01 | key_id[4] |
  nonce[12] | AES-GCM(ip || time[8])`` -> 45 bytes (IPv4 client) / 57 (IPv6); key id: bytes 1-4.
- ``ngtcp2``: ngtcp2_crypto_generate_regular_token() (ngtcp2 crypto/shared.c; v0.12.1 and
  1.x): ``0x36 | AEAD(timestamp[8]) tag[16] | rand[32]`` = 57 bytes (1.x
  ``..._regular_token2`` adds opaque data: longer); no key id (the AEAD key is derived
  from the static secret and the random tail). ``ngtcp2-retry``: first byte 0xb6.
- ``quic-go``: internal/handshake/token_protector.go: ``salt[32] | AES-GCM(nonce[12] ||
  ASN.1 DER token || tag[16])``; no key id and no constant byte, so it is recognised by its
  length only: 60 + the DER length, which depends on the client address family (IPv4 26 +
  the RTT integer's 3..6 bytes -> 89..92; IPv6 +12 -> 101..104). A length match is weak
  evidence: ``quic-go`` means "consistent with", and only ever yields key id length 0, which
  is also what an unrecognised random-looking token gets.
- ``quinn``: quinn-proto 0.11.19 src/token.rs:216-243 Token::encode(): ``AES-256-GCM(type[1]=1 |
  ip_tag[1] | ip[4|16] | issued_unix_s[8]) tag[16] | nonce[16]`` -> 46 bytes (IPv4 client) /
  58 (IPv6); no key id and no constant byte (the AEAD key is HKDF'd from the per-token
  trailing nonce, crypto/ring_like.rs aead_from_hkdf()), recognised by its exact length only
  (checked before ngtcp2's magic byte, so a quinn token starting with 0x36 is not taken for
  ngtcp2's 57-byte token).
- ``unknown``: anything else (key id length None: inferred by quic-turnover from shared
  prefixes, as before).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

NETSURVEY_TOKEN_VERSION = 0x01
NGTCP2_MAGIC_REGULAR = 0x36
NGTCP2_MAGIC_RETRY = 0xB6
NGTCP2_REGULAR_LEN = 1 + 8 + 16 + 32
QUICGO_OVERHEAD = 32 + 12 + 16
#: quinn validation (NEW_TOKEN) token lengths by client address family (False = IPv4)
QUINN_LEN = {False: 1 + 1 + 4 + 8 + 16 + 16, True: 1 + 1 + 16 + 8 + 16 + 16}
#: DER bytes of quic-go's non-Retry token without its RTT INTEGER's value bytes: SEQUENCE
#: header 2, IsRetryToken BOOLEAN 3, RemoteAddr OCTET STRING 2 + 1 + 4|16, Timestamp INTEGER
#: 2 + 8 (unix ns), RTT INTEGER header 2, two empty OCTET STRINGs 2 + 2.
_QUICGO_DER_BASE = {False: 2 + 3 + 7 + 10 + 2 + 4, True: 2 + 3 + 19 + 10 + 2 + 4}


@dataclass(frozen=True)
class TokenLayout:
    """What a token's bytes say about its issuer.

    :ivar family: 'netsurvey-testbed', 'ngtcp2', 'ngtcp2-retry', 'quic-go', 'quinn' or 'unknown'.
    :ivar key_id_offset: where a key id starts, bytes.
    :ivar key_id_len: key id length, bytes (0 = the layout has none; None = unknown).
    """

    family: str
    key_id_offset: int = 0
    key_id_len: Optional[int] = None

    @property
    def key_prefix_len(self) -> Optional[int]:
        """Leading bytes that identify the key (magic included), 0 without a key id, None unknown."""
        if self.key_id_len is None:
            return None
        return self.key_id_offset + self.key_id_len if self.key_id_len else 0


UNKNOWN = TokenLayout("unknown")


def classify_token(token: bytes, ipv6: Optional[bool] = None) -> TokenLayout:
    """The layout of ``token`` (``ipv6``: the connection's address family, for the length
    test of quic-go tokens; None = try both)."""
    n = len(token)
    if n == 0:
        return UNKNOWN
    first = token[0]
    if first == NETSURVEY_TOKEN_VERSION and n in (1 + 4 + 12 + 4 + 8 + 16, 1 + 4 + 12 + 16 + 8 + 16):
        return TokenLayout("netsurvey-testbed", 1, 4)
    fams = (False, True) if ipv6 is None else (bool(ipv6),)
    if any(n == QUINN_LEN[v6] for v6 in fams):
        return TokenLayout("quinn", 0, 0)
    if first == NGTCP2_MAGIC_REGULAR and n >= NGTCP2_REGULAR_LEN:
        return TokenLayout("ngtcp2", 1, 0)
    if first == NGTCP2_MAGIC_RETRY and n >= 1 + 1 + 8 + 16 + 32:
        return TokenLayout("ngtcp2-retry", 1, 0)
    for v6 in fams:
        rtt_len = n - QUICGO_OVERHEAD - _QUICGO_DER_BASE[v6]
        if 1 <= rtt_len <= 4:
            return TokenLayout("quic-go", 0, 0)
    return UNKNOWN


def common_key_prefix_len(layouts: list[TokenLayout]) -> Optional[int]:
    """The key prefix length all ``layouts`` agree on (None: no layouts, a mix of families,
    or an unknown one - then the prefix is inferred from the bytes)."""
    if not layouts:
        return None
    fams = {x.family for x in layouts}
    if len(fams) != 1 or layouts[0].key_id_len is None:
        return None
    return layouts[0].key_prefix_len
