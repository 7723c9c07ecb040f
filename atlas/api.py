"""The RIPE Atlas REST API v2 through ripe.atlas.cousteau, with clear errors and retries.

cousteau's requests return ``(is_success, body)`` and hide the HTTP status; the
``_Capture`` mixin keeps the last ``requests.Response`` so this module can tell a bad key
(401/403: stop at once) from throttling (429: wait ``Retry-After``) and server errors
(5xx or connection failures: retry with exponential backoff).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Optional
from urllib.parse import parse_qs, urlsplit

import requests
from ripe.atlas.cousteau import AtlasCreateRequest, AtlasRequest, AtlasResultsRequest
from ripe.atlas.cousteau.measurement import AtlasMeasurement


class AtlasApiError(Exception):
    """The API refused a request or stayed unavailable after the retries."""

    def __init__(self, message: str, status: Optional[int] = None):
        super().__init__(message)
        self.status = status


class AtlasAuthError(AtlasApiError):
    """401/403: the API key is missing, unknown or lacks the permission."""


@dataclass(frozen=True)
class ApiOptions:
    """How to reach the API.

    :ivar host: API host name (``atlas.ripe.net``; the tests use the testbed's ``atlas.test``).
    :ivar key: API key (``Authorization: Key <key>``); never stored in the repository.
    :ivar verify: TLS verification: True, False or a CA bundle path.
    :ivar max_retries: retries after a 429, a 5xx or a connection error.
    :ivar backoff_s: first wait after a 5xx (seconds); doubles per retry.
    :ivar max_wait_s: cap on any single wait, including ``Retry-After`` (seconds).
    """

    host: str = "atlas.ripe.net"
    key: Optional[str] = None
    verify: Any = True
    max_retries: int = 5
    backoff_s: float = 0.5
    max_wait_s: float = 30.0


class _Capture:
    """Mixin: remember the ``requests.Response`` cousteau got."""

    last_response: Optional[requests.Response] = None

    def get_http_method(self, method):  # noqa: D401 - cousteau hook
        self.last_response = None
        self.last_response = super().get_http_method(method)
        return self.last_response


class _Create(_Capture, AtlasCreateRequest):
    pass


class _Results(_Capture, AtlasResultsRequest):
    pass


class _Get(_Capture, AtlasRequest):
    pass


class _RawDefinition(AtlasMeasurement):
    """A definition passed through unchanged (cousteau's Dns/Ping classes validate field
    names against an old list; the body we send is exactly ``spec``)."""

    def __init__(self, spec: dict):
        self.spec = dict(spec)

    def build_api_struct(self):
        return dict(self.spec)


class _Source:
    def __init__(self, spec: dict):
        self.spec = dict(spec)

    def build_api_struct(self):
        return dict(self.spec)


def _detail(body: Any) -> str:
    """RIPE's error shape {"error": {"detail", "errors": [{"source": {"pointer"}, "detail"}]}}."""
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        e = body["error"]
        parts = [str(e.get("detail") or e.get("title") or "")]
        for x in e.get("errors") or []:
            ptr = (x.get("source") or {}).get("pointer", "")
            parts.append(f"{ptr}: {x.get('detail')}")
        return "; ".join(p for p in parts if p)
    if isinstance(body, tuple):  # requests exception args
        return " ".join(map(str, body))[:300]
    return str(body)[:300]


class AtlasClient:
    """Creates measurements, reads their status and results, lists probes."""

    def __init__(self, options: ApiOptions, *, sleep: Callable[[float], None] = time.sleep,
                 log: Callable[[str], None] = lambda _m: None):
        self.o = options
        self.sleep = sleep
        self.log = log
        self.retries_done = 0

    # ------------------------------------------------------------------ plumbing
    def _kw(self, auth: bool) -> dict:
        return {"server": self.o.host, "verify": self.o.verify,
                "key": self.o.key if auth else None,
                "user_agent": "netsurvey (RIPE Atlas resolver RTT campaign)"}

    def _call(self, what: str, make: Callable[[], Any], run: Callable[[Any], tuple]) -> Any:
        """Run a cousteau request with retries; return the decoded body on success."""
        delay = self.o.backoff_s
        for attempt in range(self.o.max_retries + 1):
            req = make()
            ok, body = run(req)
            resp = req.last_response
            status = resp.status_code if resp is not None else None
            if ok:
                return body
            last = attempt == self.o.max_retries
            if status in (401, 403):
                raise AtlasAuthError(
                    f"RIPE Atlas API at {self.o.host} refused the API key ({status}) while "
                    f"trying to {what}: {_detail(body)}. Set NETSURVEY_ATLAS_KEY to a key with "
                    "the needed permission.", status)
            if status == 429:
                ra = resp.headers.get("Retry-After", "")
                wait = min(float(ra) if ra.replace(".", "", 1).isdigit() else delay,
                           self.o.max_wait_s)
                reason = f"rate limited (429), Retry-After {ra or '-'}"
            elif status is None or status >= 500:
                wait = min(delay, self.o.max_wait_s)
                delay *= 2
                reason = (f"server error ({status})" if status else
                          f"connection failed ({_detail(body)})")
            else:
                raise AtlasApiError(f"RIPE Atlas API at {self.o.host} rejected the request to "
                                    f"{what} ({status}): {_detail(body)}", status)
            if last:
                raise AtlasApiError(f"RIPE Atlas API at {self.o.host}: could not {what} after "
                                    f"{self.o.max_retries} retries; last: {reason}", status)
            self.retries_done += 1
            self.log(f"atlas api: {reason}; retrying '{what}' in {wait:.1f} s "
                     f"({attempt + 1}/{self.o.max_retries})")
            self.sleep(wait)
        raise AssertionError("unreachable")

    def _get(self, what: str, path: str, params: Optional[dict] = None, auth: bool = False) -> Any:
        def make():
            r = _Get(url_path=path, **self._kw(auth))
            return r
        return self._call(what, make, lambda r: r.get(**(params or {})))

    # ------------------------------------------------------------------ API
    def create(self, definitions: list[dict], sources: list[dict]) -> list[int]:
        """POST one-off measurements; returns their ids (one per definition)."""
        if not self.o.key:
            raise AtlasAuthError("creating RIPE Atlas measurements needs an API key: set "
                                 "NETSURVEY_ATLAS_KEY (or [scanners.atlas] api_key)")

        def make():
            return _Create(measurements=[_RawDefinition(d) for d in definitions],
                           sources=[_Source(s) for s in sources], is_oneoff=True,
                           **self._kw(True))
        body = self._call("create measurements", make, lambda r: r.create())
        return [int(x) for x in body["measurements"]]

    def measurement(self, msm_id: int) -> dict:
        return self._get(f"read measurement {msm_id}", f"/api/v2/measurements/{msm_id}/",
                         auth=bool(self.o.key))

    def results(self, msm_id: int) -> list[dict]:
        def make():
            return _Results(msm_id=msm_id, **self._kw(bool(self.o.key)))
        return self._call(f"fetch results of {msm_id}", make, lambda r: r.create())

    def probes(self, filters: dict, limit: Optional[int] = None) -> list[dict]:
        """Probes matching ``filters`` (API query parameters), following pagination."""
        params = {"page_size": 500, **filters}
        out: list[dict] = []
        while True:
            body = self._get("list probes", "/api/v2/probes/", params)
            out += body.get("results", [])
            nxt = body.get("next")
            if not nxt or (limit is not None and len(out) >= limit):
                break
            params = {k: v[-1] for k, v in parse_qs(urlsplit(nxt).query).items()}
        return out[:limit] if limit is not None else out
