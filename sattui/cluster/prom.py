"""A reader of Prometheus's HTTP API (``/api/v1/query``, ``/api/v1/query_range``) with the
standard library's urllib: two GET endpoints returning JSON need no more.

Every failure is one :class:`PromError` line naming the server and the cause: down
(connection refused, no such host), slow (no answer within the timeout), an HTTP error
(with Prometheus's own ``error`` text when it sent one), or an answer that is not the
API's JSON (a proxy's HTML page, garbage). Text from the server is untrusted: it is
cut and its control characters escaped before it reaches a message.
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from sattui.errors import SattuiError
from sattui.textsafe import clean

DEFAULT_TIMEOUT_S = 10.0
# A range query's answer is bounded by its points: Prometheus refuses more than 11,000
# points per series; one scrape a second over 30 min is 1,800.
MAX_BODY = 64 * 1024 * 1024


class PromError(SattuiError):
    """Prometheus could not be read; the message is one line."""


def check_url(url: str) -> str:
    """``http(s)://host[:port][/prefix]`` without a trailing slash; PromError otherwise."""
    u = urllib.parse.urlsplit(url)
    if u.scheme not in ("http", "https") or not u.netloc:
        raise PromError(f"not a Prometheus URL (http://HOST:PORT): {clean(url, 200)}")
    if u.query or u.fragment:
        raise PromError(f"give Prometheus's base URL, without ?query or #fragment: {clean(url, 200)}")
    return url.rstrip("/")


@dataclass
class Series:
    """One series of an answer: its labels and its points ``(t, value)`` (NaN dropped)."""

    labels: dict[str, str]
    points: list[tuple[float, float]]

    @property
    def last(self) -> float | None:
        return self.points[-1][1] if self.points else None


class PromClient:
    def __init__(self, url: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.url = check_url(url)
        self.timeout_s = timeout_s

    def query(self, q: str, t: float | None = None) -> list[Series]:
        """An instant query at ``t`` (now by default): one point per series."""
        params = {"query": q}
        if t is not None:
            params["time"] = f"{t:.3f}"
        return self._series(self._get("/api/v1/query", params), q)

    def query_range(self, q: str, start: float, end: float, step: float) -> list[Series]:
        params = {"query": q, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{max(step, 0.001):g}"}
        return self._series(self._get("/api/v1/query_range", params), q)

    # -- internals

    def _get(self, path: str, params: dict[str, str]) -> Any:
        where = clean(self.url, 200)
        url = f"{self.url}{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=self.timeout_s) as r:
                body = r.read(MAX_BODY + 1)
        except urllib.error.HTTPError as e:
            detail = _api_error(e)
            raise PromError(f"Prometheus at {where} answered HTTP {e.code}"
                            + (f": {detail}" if detail else f" ({clean(str(e.reason), 100)})")) from None
        except TimeoutError:
            raise PromError(f"Prometheus at {where} did not answer within {self.timeout_s:g} s") from None
        except urllib.error.URLError as e:
            reason = e.reason
            if isinstance(reason, TimeoutError):
                raise PromError(f"Prometheus at {where} did not answer within {self.timeout_s:g} s") from None
            why = getattr(reason, "strerror", None) or str(reason)
            raise PromError(f"Prometheus at {where} is not reachable: {clean(why, 200)}") from None
        except (OSError, ValueError) as e:  # a connection reset mid-answer, a bad port …
            raise PromError(f"Prometheus at {where} failed: {clean(str(e), 200)}") from None
        if len(body) > MAX_BODY:
            raise PromError(f"Prometheus at {where} answered more than {MAX_BODY >> 20} MiB")
        try:
            doc = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            raise PromError(f"Prometheus at {where} answered something that is not its API's JSON: "
                            f"{clean(body[:80].decode('utf-8', 'replace'), 80)}") from None
        if not isinstance(doc, dict) or doc.get("status") != "success" or not isinstance(doc.get("data"), dict):
            err = doc.get("error") if isinstance(doc, dict) else None
            raise PromError(f"Prometheus at {where} refused the query"
                            + (f": {clean(str(err), 200)}" if err else " (no status 'success')"))
        return doc["data"]

    def _series(self, data: dict[str, Any], q: str) -> list[Series]:
        kind = data.get("resultType")
        result = data.get("result")
        if kind not in ("vector", "matrix") or not isinstance(result, list):
            raise PromError(f"Prometheus at {clean(self.url, 200)} answered an unexpected result "
                            f"({clean(str(kind), 40)}) for {clean(q, 120)}")
        out = []
        for item in result:
            if not isinstance(item, dict) or not isinstance(item.get("metric"), dict):
                raise PromError(f"Prometheus at {clean(self.url, 200)} answered a malformed series")
            labels = {str(k): str(v) for k, v in item["metric"].items()}
            raw = item.get("values") if kind == "matrix" else [item.get("value")]
            pts = []
            for p in raw or []:
                if not isinstance(p, (list, tuple)):
                    raise PromError(f"Prometheus at {clean(self.url, 200)} answered a malformed point")
                try:
                    t, v = float(p[0]), float(p[1])
                except (TypeError, ValueError, IndexError):
                    raise PromError(f"Prometheus at {clean(self.url, 200)} answered a malformed point") from None
                if not math.isnan(v) and not math.isinf(v):
                    pts.append((t, v))
            out.append(Series(labels, pts))
        return out


def _api_error(e: urllib.error.HTTPError) -> str | None:
    try:
        doc = json.loads(e.read(65536))
    except (ValueError, OSError):
        return None
    err = doc.get("error") if isinstance(doc, dict) else None
    return clean(str(err), 200) if err else None


def matcher(**labels: str | None) -> str:
    """``{a="x",b="y"}`` for the labels given (None left out), values escaped as PromQL
    wants (backslash, double quote, new line)."""
    parts = []
    for k, v in labels.items():
        if v is None:
            continue
        esc = v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        parts.append(f'{k}="{esc}"')
    return "{" + ",".join(parts) + "}"
