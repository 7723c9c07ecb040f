"""Generated pages for the page-load validation (issue 25, item 6): resource trees whose
size, domains and depth follow published page-composition statistics, written as static
files under ``/gen/TAG/`` of hosts the testbed's nginx already serves (config/testbed.toml
is not changed; ``remove`` deletes them again).

Statistics (each cited; where a source gives only a median or a mean, the spread is ours
and says so):

- Requests per page: HTTP Archive Web Almanac 2019, Page Weight chapter, Figure 8
  "Desktop page requests" (src/content/en/2019/page-weight.md in
  github.com/HTTPArchive/almanac.httparchive.org): percentiles 10/25/50/75/90 =
  24/44/74/118/179 requests; per-type medians JS 19, CSS 6, image 31, HTML 4 of 74 (the rest,
  fonts and other, are drawn as images here). A page's count is drawn from that quantile
  function (log-linear between the published points, u uniform in [0.1, 0.9]).
- Bytes per page: same chapter, Figure 4 "Page weight on desktop": percentiles 10/25/50/75/90
  = 397/924/1934/3774/6945 KB, drawn at the page's own u (bigger pages have more requests),
  times ``byte_scale`` (default 0.1: the shared testbed's tmpfs stays small; the simulator
  gets the same bytes the browser loaded, so the validation is not affected).
- Domains: Web Almanac 2019, Third Parties chapter (src/content/en/2019/third-parties.md):
  "the median page requests content from at least 9 unique third-party domains" and "49% of
  all requests are third-party". A page has round(9 * requests / 74) third-party hosts
  (at least 1, at most the hosts available): the median page has 9; 49% of its resources
  are on them.
- Depth: BLAST (Wang, NDSS 2020, sec. III-D1): "The resource tree had a mean height of
  15.4". Heights are drawn uniformly from 6..25 (mean 15.5; the spread is ours). The
  height is made of nested documents (iframes), the deepest carrying one leaf. Firefox loads
  no content frame nested deeper than 10 (Gecko dom/base/nsFrameLoader.cpp,
  ``#define MAX_DEPTH_CONTENT_FRAMES 10``): there a page taller than 11 is cut at its 10th
  document, and the logger records the truncated tree that Firefox really loaded. (Script-
  or @import-made depth would not do: the Firefox logger attributes those to the document,
  browser_probes/firefox_log.py.)

Hosts: the testbed's example.test family and a.test / b.test / t.test (TLS, no redirect);
the *.track.test hosts are left alone because the tracking experiments count connections
to them.
"""
from __future__ import annotations

import math
import random
import shutil
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

REQUESTS_PCT = [(0.10, 24), (0.25, 44), (0.50, 74), (0.75, 118), (0.90, 179)]
PAGE_KB_PCT = [(0.10, 397), (0.25, 924), (0.50, 1934), (0.75, 3774), (0.90, 6945)]
MEDIAN_THIRD_PARTY_DOMAINS = 9
MEDIAN_REQUESTS = 74
THIRD_PARTY_SHARE = 0.49
TYPE_WEIGHTS = {"js": 19, "css": 6, "img": 31 + (74 - 19 - 6 - 31 - 4)}   # HTML: the nested documents
HEIGHT_RANGE = (6, 25)
HOSTS = ["www.example.test", "static.example.test", "img.example.test", "tls12.example.test",
         "noticket.example.test", "noid.example.test", "rotate.example.test", "short.example.test",
         "a.test", "b.test", "t.test"]


def _quantile(points: list[tuple[float, float]], u: float) -> float:
    """Log-linear interpolation of a published quantile function at u in [0.1, 0.9]."""
    for (p0, v0), (p1, v1) in zip(points, points[1:]):
        if p0 <= u <= p1:
            w = (u - p0) / (p1 - p0)
            return math.exp(math.log(v0) + w * (math.log(v1) - math.log(v0)))
    raise ValueError(f"u={u} outside the published percentiles")


@dataclass
class GenResource:
    """One generated resource: ``path`` under the host's root, ``kind`` html/js/css/img,
    ``parent`` index in the page's list (None for the root document)."""

    host: str
    path: str
    kind: str
    size_bytes: int
    parent: Optional[int]
    children: list[int] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"https://{self.host}/{self.path}"


@dataclass
class GenPage:
    name: str
    u: float
    height: int
    third_party_hosts: list[str]
    resources: list[GenResource]

    @property
    def url(self) -> str:
        return self.resources[0].url


def generate(n_pages: int = 30, seed: int = 25, tag: str = "blast", byte_scale: float = 0.1,
             hosts: Optional[list[str]] = None) -> list[GenPage]:
    """``n_pages`` pages (deterministic for a seed)."""
    hosts = list(hosts or HOSTS)
    rng = random.Random(seed)
    pages = []
    for i in range(n_pages):
        u = 0.1 + 0.8 * (i + rng.random()) / n_pages          # stratified over [0.1, 0.9]
        n = max(4, round(_quantile(REQUESTS_PCT, u)))
        total_bytes = max(n * 200, round(_quantile(PAGE_KB_PCT, u) * 1000 * byte_scale))
        height = rng.randint(*HEIGHT_RANGE)
        first = hosts[i % len(hosts)]
        others = [h for h in hosts if h != first]
        k = min(len(others), max(1, round(MEDIAN_THIRD_PARTY_DOMAINS * n / MEDIAN_REQUESTS)))
        third = rng.sample(others, k)
        base = f"gen/{tag}/p{i:02d}"

        def host() -> str:
            return rng.choice(third) if rng.random() < THIRD_PARTY_SHARE else first

        res = [GenResource(first, f"{base}/index.html", "html", 0, None)]
        # the spine: nested documents down to depth height-1, one leaf at depth height
        spine = [0]
        for d in range(2, height):
            res.append(GenResource(host(), f"{base}/d{d}.html", "html", 0, spine[-1]))
            spine.append(len(res) - 1)
        kinds = list(TYPE_WEIGHTS)
        weights = [TYPE_WEIGHTS[k] for k in kinds]
        leaves = max(1, n - len(res))
        for j in range(leaves):
            # the deepest document gets the first leaf (the tree's height); the rest lean to the top
            parent = spine[-1] if j == 0 else spine[min(len(spine) - 1, int(rng.expovariate(1.0) * 2))]
            kind = rng.choices(kinds, weights)[0]
            ext = {"js": "js", "css": "css", "img": "png"}[kind]
            res.append(GenResource(host(), f"{base}/r{j:03d}.{ext}", kind, 0, parent))
        for idx, r in enumerate(res):
            if r.parent is not None:
                res[r.parent].children.append(idx)
        # bytes: split the page total over the resources (documents small, the rest by a
        # lognormal share: the median resource is far below the mean, as BLAST sec. III-D1 saw)
        shares = [0.2 if r.kind == "html" else rng.lognormvariate(0, 1.2) for r in res]
        s = sum(shares)
        for r, sh in zip(res, shares):
            r.size_bytes = max(120, round(total_bytes * sh / s))
        pages.append(GenPage(f"p{i:02d}", round(u, 4), height, third, res))
    return pages


def _png(size: int) -> bytes:
    """A valid 1x1 PNG padded to ``size`` bytes with a tEXt chunk (decoders and ORB accept it)."""
    def chunk(t: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + t + data + struct.pack(">I", zlib.crc32(t + data) & 0xFFFFFFFF)

    head = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
    idat = chunk(b"IDAT", zlib.compress(b"\x00\x00"))
    end = chunk(b"IEND", b"")
    pad = max(0, size - len(head) - len(idat) - len(end) - 12 - 8)
    return head + chunk(b"tEXt", b"pad\x00" + b"x" * pad) + idat + end


def _body(page: GenPage, r: GenResource) -> bytes:
    if r.kind == "html":
        tags = []
        for c in (page.resources[i] for i in r.children):
            if c.kind == "html":
                tags.append(f'<iframe src="{c.url}"></iframe>')
            elif c.kind == "js":
                tags.append(f'<script async src="{c.url}"></script>')
            elif c.kind == "css":
                tags.append(f'<link rel="stylesheet" href="{c.url}">')
            else:
                tags.append(f'<img src="{c.url}" alt="">')
        html = f"<!doctype html><html><head><title>{page.name}</title></head><body>\n" + "\n".join(tags) + "\n</body></html>\n"
        return (html + "<!--" + "x" * max(0, r.size_bytes - len(html) - 7) + "-->").encode()
    if r.kind == "js":
        return ("var g=1;\n/*" + "x" * max(0, r.size_bytes - 13) + "*/\n").encode()
    if r.kind == "css":
        return ("body{}\n/*" + "x" * max(0, r.size_bytes - 12) + "*/\n").encode()
    return _png(r.size_bytes)


def write(pages: list[GenPage], www_root: Path) -> int:
    """Write every page's files under ``www_root/HOST/``; returns the bytes written. Only
    hosts that already have a document root are used (the testbed must be up)."""
    written = 0
    for p in pages:
        for r in p.resources:
            root = www_root / r.host
            if not root.is_dir():
                raise FileNotFoundError(f"{root}: no document root for {r.host} (is the testbed up?)")
            f = root / r.path
            f.parent.mkdir(parents=True, exist_ok=True)
            body = _body(p, r)
            f.write_bytes(body)
            r.size_bytes = len(body)
            written += len(body)
    return written


def remove(www_root: Path, tag: str, hosts: Optional[list[str]] = None) -> None:
    for h in hosts or HOSTS:
        shutil.rmtree(www_root / h / "gen" / tag, ignore_errors=True)
        try:
            (www_root / h / "gen").rmdir()
        except OSError:
            pass


def summary(pages: list[GenPage]) -> dict:
    """What the generated pages look like, for comparison with the published statistics."""
    from statistics import mean, median

    return {"pages": len(pages), "median_requests": median(len(p.resources) for p in pages),
            "requests_p10_p90": (sorted(len(p.resources) for p in pages)[len(pages) // 10],
                                 sorted(len(p.resources) for p in pages)[(9 * len(pages)) // 10]),
            "median_third_party_domains": median(len({r.host for r in p.resources} - {p.resources[0].host})
                                                 for p in pages),
            "mean_height": mean(p.height for p in pages),
            "third_party_request_share": sum(r.host != p.resources[0].host for p in pages for r in p.resources)
            / sum(len(p.resources) for p in pages)}
