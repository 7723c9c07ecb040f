"""`netsurvey testbed zoo-record`: collect the zoos' cited facts (testbed ground truth) and write them to
``zoo_documented_default``: one row per (zoo, server, fact), replacing the zoo's old rows."""
from __future__ import annotations

import json
from typing import Any, Iterator

#: zoo name -> what it is (for --help and the output)
ZOOS = {"tls": "TLS zoo of the shared testbed (testbed up)", "tls2": "TLS zoo 2 (testbed zoo2 up)",
        "dns": "DNS zoo (testbed zoo-dns up)", "quic": "QUIC zoo (testbed zoo-quic up)"}


def _unit(fact: str, value: Any) -> str | None:
    """Unit of a numeric documented value, from the fact's name."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if fact.endswith("_s"):
        return "s"
    if fact.endswith(("_len", "_bytes", "max_early_data")):
        return "bytes"
    if "count" in fact:
        return "count"
    return None


def _facts(facts: dict) -> Iterator[tuple[str, Any, dict, str | None]]:
    """(fact, value, further properties, citation) of a ground-truth facts dict."""
    for fact, entry in facts.items():
        if fact == "implementation":
            continue
        if isinstance(entry, dict):
            rest = {k: v for k, v in entry.items() if k not in ("value", "source")}
            yield fact, entry.get("value"), rest, entry.get("source")
        else:
            yield fact, entry, {}, None


def zoo_hosts() -> Iterator[dict]:
    """Every zoo server with its facts: zoo, label, hostname, addresses, port, zone, facts.
    A zoo whose testbed module is absent is left out."""
    try:
        from testbed.zoo import _FACTS, HOSTS
    except ImportError:
        pass
    else:
        for h in HOSTS:
            yield {"zoo": "tls", "label": h.label, "hostname": h.hostname, "addresses": list(h.addresses),
                   "port": h.port, "zone": None, "facts": _FACTS[h.label]}
    try:
        from testbed.zoo2 import _hosts
    except ImportError:
        pass
    else:
        for label, h in _hosts().items():
            yield {"zoo": "tls2", "label": label, "hostname": h["hostname"], "addresses": list(h["addresses"]),
                   "port": h["port"], "zone": None, "facts": h["facts"]}
    try:
        from testbed.zoo_dns import HOSTS as DNS_HOSTS, ZONE
        from testbed.zoo_dns_facts import FACTS as DNS_FACTS
    except ImportError:
        pass
    else:
        for d in DNS_HOSTS:
            if d.label in DNS_FACTS:
                yield {"zoo": "dns", "label": d.label, "hostname": None, "addresses": [d.v4, d.v6], "port": None,
                       "zone": ZONE, "facts": DNS_FACTS[d.label]}
    try:
        from testbed.zoo_quic import HOSTS as QUIC_HOSTS, QUIC_PORT
        from testbed.zoo_quic_facts import FACTS as QUIC_FACTS
    except ImportError:
        pass
    else:
        for q in QUIC_HOSTS:
            if q.label in QUIC_FACTS:
                yield {"zoo": "quic", "label": q.label, "hostname": q.hostname, "addresses": [q.v4, q.v6],
                       "port": QUIC_PORT, "zone": None, "facts": QUIC_FACTS[q.label]}


def record(db, zoos: tuple[str, ...] = tuple(ZOOS)) -> dict[str, int]:
    """Replace the rows of ``zoos`` in zoo_documented_default with the current ground truth;
    returns rows written per zoo."""
    from netsurvey import __version__

    by = f"netsurvey testbed zoo-record (netsurvey {__version__})"
    counts = {z: 0 for z in zoos}
    with db.connect() as conn:
        conn.execute("DELETE FROM zoo_documented_default WHERE zoo = ANY(%s)", (list(zoos),))
        for h in zoo_hosts():
            if h["zoo"] not in zoos:
                continue
            impl = h["facts"].get("implementation")
            for fact, value, rest, source in _facts(h["facts"]):
                conn.execute(
                    "INSERT INTO zoo_documented_default (zoo, label, hostname, addresses, port, zone, implementation,"
                    " fact, value, unit, detail, source, recorded_by) VALUES (%s, %s, %s, %s::inet[], %s, %s, %s,"
                    " %s, %s::jsonb, %s, %s::jsonb, %s, %s)",
                    (h["zoo"], h["label"], h["hostname"], h["addresses"], h["port"], h["zone"],
                     None if impl is None else str(impl), fact, json.dumps(value), _unit(fact, value),
                     json.dumps(rest), source, by))
                counts[h["zoo"]] += 1
        conn.commit()
    return counts
