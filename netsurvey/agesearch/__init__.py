"""Protocol-free age search of the long-lived lifetime probes (``scan tls-lifetime``,
``scan quic-turnover``): a probe establishes state (a TLS session, a QUIC ticket or token)
and presents it once, at an age a = k x step (grid index k = 1 .. n); the search brackets
the lifetime in rounds with a bounded number of held states.

- :mod:`.grid`: the ages of a round (:func:`next_points`, :func:`exhaustive_points`),
  :func:`default_slots`, :func:`decided_index` and the :class:`DueQueue`.
- :mod:`.engine`: :class:`AgeSearch`, the scheduler (chains, rounds, drops, the window of
  hosts, resume), driven through a :class:`Probe`.
- :mod:`.events`: reading an event log back for ``--resume``.

Used by scanners/tls/schedule.py and scanners/quic/schedule.py; nothing here knows a protocol.
"""
from .engine import AgeSearch, Chain, EventLog, Held, Host, Missing, Outcome, PriorChain, Probe
from .events import prior_chains, unanswered
from .grid import DueQueue, decided_index, default_slots, exhaustive_points, next_points

__all__ = ["AgeSearch", "Chain", "DueQueue", "EventLog", "Held", "Host", "Missing", "Outcome", "PriorChain", "Probe",
           "decided_index", "default_slots", "exhaustive_points", "next_points", "prior_chains", "unanswered"]
