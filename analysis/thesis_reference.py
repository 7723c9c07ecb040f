"""The thesis's published values, one entry per number, keyed by the figure/table name that
``netsurvey plot --list`` knows. Figures draw them beside ours (analysis/thesis_overlay.py)
and the report prints them beside ours.

Source: the thesis text (seed file 004_3801537972db3902.txt; the figures themselves are
missing from it, captions and the numbers in the text remain). Every entry quotes the
sentence (or table row) that states the value, verbatim, so tests/analysis/test_thesis_reference.py
can find it in the text. The text version carries no page numbers, so ``where`` names the
section and figure/table. Nothing here is estimated or read off a plot: where the thesis
states no number for a figure, ``NOT_PUBLISHED`` says so and why.

Fields of a :class:`Ref`:

* ``stat`` - how the value relates to the figure's data (``value`` is in ``unit``):
  ``share_lt`` / ``share_le`` / ``share_gt`` / ``share_ge`` / ``share_eq`` (% of the series'
  observations below / at most / above / at least / exactly ``x``), ``share_null`` (% with
  no value, e.g. never resumed), ``quantile`` (the ``p``-quantile is ``value``), ``max``
  (largest value), ``mean``, ``at`` (the value of a bar/point at category ``x``),
  ``count`` (a sample size or count, never drawn);
* ``series`` - our series (CDF group / bar label) it corresponds to, None = the figure's
  only or pooled series;
* ``qualifier`` - the thesis's own hedge: ``""`` exact, ``"~"`` (around/approximately),
  ``">"`` (more than / above), ``">="`` (at least), ``"<"``, ``"<="`` (at most);
* ``draw`` - False for values that would mislead on our axes (the CSV and the report still
  list them);
* ``top`` - the top-list cut the thesis states the value for (Top 100K: 100000): ours is
  computed over ranks 1..top only, and only when our list reaches that rank (a list of 22
  names is not the Top 100K: ours stays empty);
* ``given_gt`` - the share is of the observations above this value only (the thesis's
  "of the remaining sites"), not of all.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

#: Where the text is stated (the thesis text has no page numbers).
SOURCE = "thesis text (seed 004_3801537972db3902.txt)"


@dataclass(frozen=True)
class Ref:
    figure: str
    key: str
    what: str
    value: float
    unit: str
    where: str
    quote: str
    stat: str = "at"
    x: Optional[float] = None
    p: Optional[float] = None
    series: Optional[str] = None
    qualifier: str = ""
    draw: bool = True
    top: Optional[int] = None
    given_gt: Optional[float] = None

    def value_text(self) -> str:
        q = {"~": "~", ">": ">", ">=": ">=", "<": "<", "<=": "<=", "": ""}[self.qualifier]
        unit = self.unit if self.unit in ("%",) else f" {self.unit}"
        return f"{q}{self.value:g}{unit}"

    def label(self) -> str:
        """Legend text: 'thesis: probes < 10 ms RTT to a same-AS resolver: 59% (Sec 2.4.1, Fig 2.4)'."""
        return f"thesis: {self.what}: {self.value_text()} ({self.where})"


def _tfo(cut_label: str, cut: int, value: float) -> Ref:
    return Ref("tfo-support-table", f"tfo_share_top_{cut}", f"hostnames with TFO support in Alexa {cut_label}",
               value, "%", "Sec 3.2.2, Table 3.1", f"Alexa {cut_label}\t{value:.1f}%", stat="at", x=cut,
               series=None)


def _quic(cut_label: str, cut: int, text: str) -> Ref:
    return Ref("quic-support", f"quic_share_top_{cut}", f"websites with QUIC support in Alexa {cut_label}",
               float(text), "%", "Sec 6.4.2, Table 6.2", f"Alexa {cut_label}\t{text}%", stat="at", x=cut)


_S241 = "Sec 2.4.1, Fig 2.4"
_S242 = "Sec 2.4.2, Fig 2.5"
_S322 = "Sec 3.2.2"
_S451 = "Sec 4.5.1"

REFERENCES: tuple[Ref, ...] = (
    # ---- chapter 2: resolver-less DNS ---------------------------------------------------
    Ref("atlas-resolver-rtt", "share_below_10ms_same_as", "probes < 10 ms RTT to a same-AS resolver", 59, "%",
        _S241, "59% of the tested nodes experienced less than 10 ms round-trip time when the resolver was "
               "located within the same AS", stat="share_lt", x=10, series="same AS"),
    Ref("atlas-resolver-rtt", "share_below_10ms_other_as", "probes < 10 ms RTT to an other-AS resolver", 17, "%",
        _S241, "only 17% of the clients completed the round-trip within this duration when the peers did not "
               "share the same AS", stat="share_lt", x=10, series="other AS"),
    Ref("atlas-resolver-rtt", "p95_ms_all", "95th percentile RTT, all resolvers", 49, "ms", _S241,
        "For the solid, blue plot the 95th percentile and the 99th percentile have a value of 49 ms and 80 ms, "
        "respectively.", stat="quantile", p=0.95, series="all"),
    Ref("atlas-resolver-rtt", "p99_ms_all", "99th percentile RTT, all resolvers", 80, "ms", _S241,
        "For the solid, blue plot the 95th percentile and the 99th percentile have a value of 49 ms and 80 ms, "
        "respectively.", stat="quantile", p=0.99, series="all"),
    Ref("atlas-resolver-rtt", "n_probes", "RIPE Atlas nodes in Germany", 650, "probes", _S241,
        "Figure 2.4 plots a cumulative distribution of the round-trip time between 650 RIPE Atlas nodes located "
        "in Germany", stat="count", draw=False),

    Ref("dns-ttl-cdf", "share_300s_aaaa", "AAAA records with TTL exactly 300 s", 80.6, "%", _S242,
        "We find that 80.6% of the AAAA and 40.2% of the A DNS records use exactly this configuration.",
        stat="share_eq", x=300, series="AAAA", draw=False),
    Ref("dns-ttl-cdf", "share_300s_a", "A records with TTL exactly 300 s", 40.2, "%", _S242,
        "We find that 80.6% of the AAAA and 40.2% of the A DNS records use exactly this configuration.",
        stat="share_eq", x=300, series="A", draw=False),
    Ref("dns-ttl-cdf", "share_60s_a", "A records with TTL exactly 60 s", 12.8, "%", _S242,
        "A DNS records often use one and ten minutes expiration time with a share of 12.8% and 10.5%, "
        "respectively.", stat="share_eq", x=60, series="A", draw=False),
    Ref("dns-ttl-cdf", "share_600s_a", "A records with TTL exactly 600 s", 10.5, "%", _S242,
        "A DNS records often use one and ten minutes expiration time with a share of 12.8% and 10.5%, "
        "respectively.", stat="share_eq", x=600, series="A", draw=False),
    Ref("dns-ttl-cdf", "share_over_30min_a", "A records with TTL > 1800 s", 12.5, "%", _S242,
        "only a tail of 12.5% of the A records and 6.4% of the AAAA records advertise expiration times longer "
        "than 30 minutes", stat="share_gt", x=1800, series="A"),
    Ref("dns-ttl-cdf", "share_over_30min_aaaa", "AAAA records with TTL > 1800 s", 6.4, "%", _S242,
        "only a tail of 12.5% of the A records and 6.4% of the AAAA records advertise expiration times longer "
        "than 30 minutes", stat="share_gt", x=1800, series="AAAA"),
    Ref("dns-ttl-cdf", "share_under_60s_a", "A records with TTL < 60 s", 6.2, "%", _S242,
        "6.2% of the A records and 3.5% of the AAAA records announce an expiration time shorter than one minute",
        stat="share_lt", x=60, series="A"),
    Ref("dns-ttl-cdf", "share_under_60s_aaaa", "AAAA records with TTL < 60 s", 3.5, "%", _S242,
        "6.2% of the A records and 3.5% of the AAAA records announce an expiration time shorter than one minute",
        stat="share_lt", x=60, series="AAAA"),

    Ref("dns-ecs-scopes", "share_global_scope", "ECS answers with global scope (/0)", 88.8, "%",
        "Sec 2.4.3", "88.8% of these records announce a global scope", stat="share_eq", x=0),
    Ref("dns-ecs-scopes", "share_scope_23_24", "ECS answers with a /23 or /24 scope", 10.0, "%", "Sec 2.4.3",
        "10.0% of the responses covered a scope of /23 and /24", stat="share_eq", x=23.5, draw=False),

    # ---- chapter 3: TCP Fast Open -------------------------------------------------------
    _tfo("Top 10", 10, 60.0), _tfo("Top 100", 100, 28.0), _tfo("Top 1K", 1000, 12.4),
    _tfo("Top 10K", 10000, 5.9), _tfo("Top 100K", 100000, 3.4), _tfo("Top 1M", 1000000, 3.2),

    Ref("tfo-addresses-per-host", "share_several_addresses", "hostnames always supporting TFO served from >= 2 "
        "addresses", 81, "%", f"{_S322}, Fig 3.2", "at least 81% of the tested hostnames are served from several "
        "IP addresses", stat="share_ge", x=2, qualifier=">="),
    Ref("tfo-addresses-per-host", "mean_addresses", "mean server addresses per hostname", 2.1, "addresses",
        f"{_S322}, Fig 3.2", "On average, the tested hostnames are served each from 2.1 different IP addresses "
        "across our measurements.", stat="mean"),
    Ref("tfo-addresses-per-host", "share_always_tfo", "hostnames supporting TFO at every connection", 94, "%",
        f"{_S322}, Fig 3.2", "About 94% of the investigated hostnames indicated, support for the TFO protocol at "
        "each of these connections.", stat="at", x=None, series="always", qualifier="~", draw=False),
    Ref("tfo-addresses-per-host", "n_always_tfo", "hostnames always supporting TFO", 30218, "hostnames",
        f"{_S322}, Fig 3.2", "the 30 218 hostnames always supporting TFO", stat="count", draw=False),
    Ref("tfo-lb-failure-rate", "failure_connection_2", "failure rate at the 2nd connection", 39.3, "%",
        f"{_S322}, Fig 3.3", "the second TFO connection to a hostname fails in 39.3% of all attempts",
        stat="at", x=2),
    Ref("tfo-lb-failure-rate", "failure_connection_3", "failure rate at the 3rd connection", 24.7, "%",
        f"{_S322}, Fig 3.3", "For the third connection to a hostname, we observe an average failure rate of "
        "24.7%.", stat="at", x=3),

    # ---- chapter 4: TLS session resumption ----------------------------------------------
    Ref("tls-support", "share_session_id", "TLS sites supporting session IDs", 95.9, "%", f"{_S451}, Fig 4.5",
        "95.9% of these sites do either support session IDs or both IDs and tickets.", stat="at",
        x=None, series="session_id"),
    Ref("tls-support", "share_ticket", "TLS sites supporting session tickets", 77.6, "%", f"{_S451}, Fig 4.5",
        "77.6% of all TLS-enabled Alexa Top Million Sites do also support session tickets", stat="at",
        series="ticket"),
    Ref("tls-support", "n_tls_sites", "Alexa Top 1M sites supporting TLS", 691280, "sites", f"{_S451}, Fig 4.5",
        "In total, we found 691 280 sites among the Alexa Top Million that supported TLS.", stat="count",
        draw=False),

    # "With 46% and 71% ... within the Alexa Top Hundred Thousand and Alexa Top Million
    # respectively" (thesis line 1153): one value per top list, each compared over that cut only
    Ref("tls-lifetime-hint", "share_hint_300s_top1m", "ticket hints of exactly 300 s (Top 1M)", 71, "%",
        f"{_S451}, Fig 4.6", "With 46% and 71%, a lifetime hint of five minutes is the most popular "
        "configuration within the Alexa Top Hundred Thousand and Alexa Top Million respectively.",
        stat="share_eq", x=300, series="1.2", draw=False, top=1000000),
    Ref("tls-lifetime-hint", "share_hint_300s_top100k", "ticket hints of exactly 300 s (Top 100K)", 46, "%",
        f"{_S451}, Fig 4.6", "With 46% and 71%, a lifetime hint of five minutes is the most popular "
        "configuration within the Alexa Top Hundred Thousand and Alexa Top Million respectively.",
        stat="share_eq", x=300, series="1.2", draw=False, top=100000),
    Ref("tls-lifetime-hint", "share_hint_le_600s", "ticket hints <= 600 s (Top 1M)", 80, "%",
        f"{_S451}, Fig 4.6", "more than 80% of TLS session ticket enabled sites within the Alexa Top Million "
        "chose lifetime hints of less than or equal to ten minutes", stat="share_le", x=600, series="1.2",
        qualifier=">"),
    # line 1157: "around 10% of the remaining sites" - of the sites NOT at <= 10 minutes (the
    # other < 20%), i.e. about 2% of all: a share among the hints above 600 s, not a point on the CDF
    Ref("tls-lifetime-hint", "share_hint_gt_24h", "ticket hints > 86400 s among the hints > 600 s", 10, "%",
        f"{_S451}, Fig 4.6", "around 10% of the remaining sites use lifetime hints larger than 24 hours",
        stat="share_gt", x=86400, series="1.2", qualifier="~", given_gt=600),
    Ref("tls-lifetime-hint", "share_hint_zero", "ticket hints of 0 s", 2, "%", f"{_S451}, Fig 4.6",
        "In both sets, around 2% of all sites use a lifetime hint of zero seconds.", stat="share_eq", x=0,
        series="1.2", qualifier="~", draw=False),
    Ref("tls-lifetime-hint", "share_ticket_not_resumed", "sites not resuming a ticket even immediately (measured)",
        10, "%",
        f"{_S451}, Fig 4.6", "around 10% of the sites do not allow a resumption with session tickets immediately "
        "after the initial visit", stat="share_null", series="ticket TLS 1.2", qualifier="~",
        draw=False),
    Ref("tls-lifetime-hint-tail", "share_hint_le_28h", "ticket hints <= 28 h (Google's hint, 100800 s)", 97.13,
        "%", f"{_S451}, Fig 4.7", "Google and various of its domains are configured to a ticket lifetime of 28 "
        "hours, which is above the 97,13% percentile in the Alexa Top Million Sites", stat="share_le",
        x=100800, series="1.2", qualifier=">"),
    Ref("tls-lifetime-hint-tail", "share_hint_le_48h", "ticket hints <= 48 h (Facebook's hint, 172800 s)", 99.99,
        "%", f"{_S451}, Fig 4.7", "Facebook’s lifetime hint of 48 hours is above the 99.99% percentile of all "
        "session ticket hints that we collected in our scans.", stat="share_le", x=172800, series="1.2",
        qualifier=">"),
    Ref("tls-lifetime-measured", "share_id_not_resumed", "sites not resuming a session ID even immediately",
        23, "%", f"{_S451}, Fig 4.8", "are 23% of the websites", stat="share_null",
        series="id TLS 1.2", draw=False),
    Ref("tls-lifetime-measured", "share_id_gt_2h", "sites resuming session IDs after > 7200 s", 20, "%",
        f"{_S451}, Fig 4.8", "More than 20% of websites within the Alexa Top Hundred Thousand that support "
        "session IDs allow resumptions after more than two hours.", stat="share_gt", x=7200,
        series="id TLS 1.2", qualifier=">"),
    # line 1164: "We observe in both figures [4.6: tickets, 4.8: IDs], that approximately 40% of
    # the sites support maximum resumption lifetimes above five minutes": one value per mechanism
    Ref("tls-lifetime-measured", "share_gt_5min", "sites with maximum session-ID resumption lifetime > 300 s",
        40, "%", f"{_S451}, Fig 4.8", "We observe in both figures, that approximately 40% of the sites support "
        "maximum resumption lifetimes above five minutes", stat="share_gt", x=300, series="id TLS 1.2",
        qualifier="~"),
    Ref("tls-lifetime-measured", "share_gt_5min_ticket", "sites with maximum ticket resumption lifetime > 300 s",
        40, "%", f"{_S451}, Fig 4.6", "We observe in both figures, that approximately 40% of the sites support "
        "maximum resumption lifetimes above five minutes", stat="share_gt", x=300, series="ticket TLS 1.2",
        qualifier="~"),
    Ref("tls-lifetime-hint", "share_gt_5min_ticket", "sites with maximum ticket resumption lifetime > 300 s "
        "(measured)", 40, "%", f"{_S451}, Fig 4.6", "We observe in both figures, that approximately 40% of the "
        "sites support maximum resumption lifetimes above five minutes", stat="share_gt", x=300,
        series="ticket TLS 1.2", qualifier="~"),
    Ref("tls-shared-groups", "share_not_shared", "sites sharing TLS state with no other site", 72, "%",
        f"{_S451}, Fig 4.9", "72% of the Alexa Top Thousand do either not support session resumption or do not "
        "share their TLS state with any other site", stat="share_le", x=1, series="resumption"),
    Ref("tls-shared-groups", "share_group_ge_26", "sites sharing TLS state with >= 25 other sites", 16, "%",
        f"{_S451}, Fig 4.9", "around 16% of websites share their TLS state with at least 25 other sites",
        stat="share_ge", x=26, series="resumption", qualifier="~"),
    Ref("tls-shared-groups", "largest_group", "largest shared TLS state (Google)", 84, "sites",
        f"{_S451}, Fig 4.9", "The largest shared TLS state within the Alexa Top Thousand counts 84 sites",
        stat="max", series="resumption"),
    Ref("tls-key-rotation", "share_stek_le_3d", "ticket sites changing their STEK within 3 days (259200 s)",
        73, "%", f"{_S451}, Fig 4.10", "73% of the TLS session ticket enabled Alexa Top Million Sites to change "
        "their STEK within three days", stat="share_le", x=259200, series="1.2"),
    Ref("tls-key-rotation", "share_stek_gt_2w", "ticket sites keeping their STEK > 2 weeks (1209600 s)", 10,
        "%", f"{_S451}, Fig 4.10", "10% of the websites with support for session tickets did not change their "
        "STEK within two weeks", stat="share_gt", x=1209600, series="1.2"),

    # ---- chapter 5: TLS resumption across hostnames ---------------------------------------
    Ref("tls-root-trust-group", "share_root_related", "root domains with a trust relation to another hostname "
        "of their domain tree", 77.12, "%", "Sec 5.4.3, Fig 5.4", "We find, that 77.12% of the root-domains have a "
        "trust-relation to another hostname within their domain tree.", stat="share_ge", x=1, series="union"),
    Ref("tls-root-trust-group", "share_root_lt_11", "root domains with trust relations to fewer than 11 hostnames",
        90.94, "%", "Sec 5.4.3, Fig 5.4", "Furthermore, 90.94% of the root-domains have a trust-relation to less "
        "than eleven hostnames within their domain tree.", stat="share_lt", x=11, series="union"),
    Ref("tls-root-trust-group", "share_root_1", "sites whose root has exactly one trust relation", 19.66, "%",
        "Sec 5.4.3, Fig 5.4", "Popular configurations have one or two trust relations for the root-domain, which "
        "represent 19.66% and 17.04% of the Alexa Top 1K Sites respectively.", stat="share_eq", x=1,
        series="union"),
    Ref("tls-root-trust-group", "share_root_2", "sites whose root has exactly two trust relations", 17.04, "%",
        "Sec 5.4.3, Fig 5.4", "Popular configurations have one or two trust relations for the root-domain, which "
        "represent 19.66% and 17.04% of the Alexa Top 1K Sites respectively.", stat="share_eq", x=2,
        series="union"),
    Ref("tls-shared-table", "mean_size_san", "mean trust-group size per domain tree, TLS certificates", 2.13,
        "hostnames", "Sec 5.4.3, Table 5.3", "The mean size of a trust groups is 2.13 as shown in Table 5.3.",
        stat="mean", series="san"),
    Ref("tls-shared-table", "mean_size_resumption", "mean trust-group size per domain tree, TLS resumption",
        1.50, "hostnames", "Sec 5.4.3, Table 5.3", "As shown in Table 5.3, the mean size of these trust groups "
        "is 1.50.", stat="mean", series="resumption"),
    Ref("tls-shared-table", "mean_size_union", "mean trust-group size per domain tree, union", 2.42,
        "hostnames", "Sec 5.4.3, Table 5.3", "we find a mean size of the trust groups per Alexa Top 1K Site of "
        "2.42", stat="mean", series="union"),

    # ---- chapter 6: QUIC --------------------------------------------------------------------
    _quic("Top 10", 10, "20.00"), _quic("Top 100", 100, "21.00"), _quic("Top 1K", 1000, "8.10"),
    _quic("Top 10K", 10000, "1.69"), _quic("Top 100K", 100000, "0.19"), _quic("Top 1M", 1000000, "0.02"),
    Ref("quic-lifetimes", "sttl_google_max_h", "gQUIC server config TTL of Google domains (upper end; analogue "
        "of our token/ticket acceptance)", 48, "h", "Sec 6.4.2 (Server config time to live)",
        "the domains belonging to Google deploy STTLs between 32 and 48 hours", stat="max", draw=False),
    Ref("quic-lifetimes", "sttl_other_max_h", "gQUIC server config TTL of the 45 other domains (upper end)",
        4320, "h", "Sec 6.4.2 (Server config time to live)", "the other 45 domains exhibited STTLs between 4311 "
        "and 4320 hours", stat="max", draw=False),
    Ref("quic-turnover", "server_config_period_h", "gQUIC server config turnover period, at most (analogue of "
        "our key turnover)", 12, "h", "Sec 6.4.2 (Server config turnover)", "the investigated web servers issue "
        "new *server configs* at least every twelve hours", stat="max", qualifier="<=", draw=False),

    # ---- chapter 9: QuicSocks ---------------------------------------------------------------
    Ref("atlas-rtt-triplet", "share_rtt_dns_below_10ms", "probes with RTT_DNS < 10 ms (ISP resolver)", 60, "%",
        "Sec 9.4.2, Fig 9.6", "60% of the nodes have a RTT with their ISP-provided DNS resolver of less than "
        "10 ms", stat="share_lt", x=10, series="RTT_DNS"),
    Ref("atlas-rtt-triplet", "share_server_5ms_faster", "probes with RTT_Server >= 5 ms below RTT_direct", 51,
        "%", "Sec 9.4.2, Fig 9.6", "For 51% of the considered RIPE Atlas nodes, RTT_{Server} is at least 5 ms "
        "smaller than RTT_{direct} .", stat="at", draw=False),
    Ref("atlas-rtt-triplet", "share_server_10ms_faster", "probes with RTT_Server >= 10 ms below RTT_direct",
        36.7, "%", "Sec 9.4.2, Fig 9.6", "36.7% of the nodes experience RTT_{Server} to be at least 10 ms "
        "smaller than RTT_{direct} .", stat="at", draw=False),
    Ref("atlas-rtt-triplet", "share_server_40ms_faster", "probes with RTT_Server >= 40 ms below RTT_direct",
        7.2, "%", "Sec 9.4.2, Fig 9.6", "we find 7.2% and 3.8% of the nodes to have a RTT_{Server} that "
        "outperforms RTT_{direct} by at least 40 ms and 50 ms, respectively", stat="at", draw=False),
    Ref("atlas-rtt-triplet", "share_server_50ms_faster", "probes with RTT_Server >= 50 ms below RTT_direct",
        3.8, "%", "Sec 9.4.2, Fig 9.6", "we find 7.2% and 3.8% of the nodes to have a RTT_{Server} that "
        "outperforms RTT_{direct} by at least 40 ms and 50 ms, respectively", stat="at", draw=False),
)

#: Figures for which this file holds no value, with the reason: the thesis states no number
#: to compare, or (MODEL_COMPARED) the model figure compares its published values itself.
NOT_PUBLISHED: dict[str, str] = {
    "vantage-compare-dns-ecs": "no thesis counterpart: the thesis scanned from one vantage; this compares "
                               "vantages of our own (several vantages sharing one database)",
    "vantage-compare-handshake-timing": "no thesis counterpart: the thesis timed handshakes from one vantage "
                                        "(Tables 3.5/5.1); this compares vantages of our own (several vantages sharing one database)",
    "browser-plt-cdf": "no thesis counterpart: the page-load time is BLAST's metric, the thesis has no such figure",
    "browser-tracking-table": "Tables 3.2, 4.2 and 6.1 are per-browser verdicts for the 2018-2019 browser "
                              "versions tested then; not entered as reference numbers (other browsers/versions)",
    "quic-tracking": "a per-host table; the thesis's STTL and turnover numbers (Sec 6.4.2) are entered for "
                     "quic-lifetimes and quic-turnover",
    "quic-state": "the thesis measured gQUIC's server config and source-address tokens (Sec 6.4.2), not IETF "
                  "QUIC's NEW_TOKEN tokens and tickets; no share of hosts handing them out is published",
    "browser-revisit-savings": "no thesis counterpart: the thesis times its own client's handshakes (Table 5.1, "
                               "handshake-tls-delay-table), not a browser's revisit",
    "zoo-table": "a validation table of our own (netsurvey against independent clients and the documented defaults of the testbed's server zoo); "
                 "not a thesis figure",
}

#: Model figures that carry their published values in their own ``ctx.compare`` calls
#: (analysis/simulations.py); shown in the report when the model runs.
MODEL_COMPARED: dict[str, str] = {
    name: "the thesis's values are compared by the model itself (analysis/simulations.py) when it runs"
    for name in ("oob-tokens", "pageload-validation", "prolongation", "quicsocks-cdf", "quicsocks-table",
                 "shared-address-validation", "tfo-revisits-table", "tls-across-hostnames")}
# handshake timing (issue 25): the Tables 3.5/5.1/5.2/5.7 plots put the thesis's published
# values in their own columns (analysis/timing.py)
MODEL_COMPARED.update({
    name: "the thesis's values are in the table's own thesis columns (analysis/timing.py)"
    for name in ("handshake-tfo-table", "handshake-tls-cpu-table", "handshake-tls-delay-table",
                 "handshake-tls13-support-table")})


def for_figure(name: str) -> tuple[Ref, ...]:
    """The published values of figure ``name`` (empty if the thesis gives none)."""
    return tuple(r for r in REFERENCES if r.figure == name)
# BLAST's analyses (issue 25, item 5/6): the paper's (Wang, NDSS 2020) stated values are drawn on
# the figures and compared by the figures themselves (analysis/blast.py), section by section
MODEL_COMPARED.update({
    name: "BLAST's published values (not the thesis's) are compared by the figure itself (analysis/blast.py)"
    for name in ("blast-load-breakdown", "blast-queue-wait-cdf", "blast-head-of-line", "blast-feature-steps",
                 "blast-sweeps", "blast-validation")})
