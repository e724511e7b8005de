"""The exporter's HTTP listener (``--metrics HOST:PORT``): prometheus_client's threading
WSGI server, on exactly the address given and nowhere else; without the flag sattui opens
no listening socket (docs/cluster.md).

The listener runs in its own daemon thread; a scrape reads a snapshot of the node's facts
(sattui/metrics/node.py), so it never waits on sampling, nor sampling on it. The
exposition is prometheus_client's text format, written through a cache of each series'
name and labels (exposition.Renderer: the same bytes as ``generate_latest``, a fifth of
its cost).
"""

from __future__ import annotations

import errno
import gzip
import ipaddress
import socket
import threading
from typing import Any

from sattui.errors import SattuiError
from sattui.metrics.node import NodeMetrics


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` for an IPv6 address) -> ``(host, port)``; a
    ``ValueError`` with the reason otherwise. The host is required: sattui listens only
    where it is told."""
    host, sep, port_s = text.rpartition(":")
    if not sep or not host:
        raise ValueError(f"expected HOST:PORT (e.g. 127.0.0.1:9400), got {text!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"not an IPv6 address: {host!r}") from None
    elif ":" in host:
        raise ValueError(f"write an IPv6 address in brackets: [{host}]:{port_s}")
    if not host or any(c.isspace() or not c.isprintable() for c in host):
        raise ValueError(f"not a host name: {host!r}")
    try:
        port = int(port_s)
    except ValueError:
        raise ValueError(f"not a port number: {port_s!r}") from None
    if not 0 < port < 65536:
        raise ValueError(f"port out of range (1-65535): {port}")
    return host, port


class MetricsServer:
    """Serves one :class:`NodeMetrics` on ``address``. ``start()`` binds at once, so a
    port in use is said before anything else starts."""

    def __init__(self, address: tuple[str, int], node: NodeMetrics) -> None:
        self.address = address
        self.node = node
        self._httpd: Any = None
        self._thread: threading.Thread | None = None
        self._render_lock = threading.Lock()
        self._renderer: Any = None

    def app(self, environ: dict[str, Any], start_response: Any) -> list[bytes]:
        """The WSGI app: ``GET /metrics`` (and ``/``) is the exposition, gzipped when the
        scraper accepts it, as Prometheus does; anything else is 404."""
        from prometheus_client import CONTENT_TYPE_LATEST

        from sattui.metrics.exposition import rows

        if environ.get("PATH_INFO", "/") not in ("/", "/metrics"):
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not found: the metrics are at /metrics\n"]
        with self._render_lock:
            body = self._renderer.render(rows(self.node.snapshot()))
        headers = [("Content-Type", CONTENT_TYPE_LATEST)]
        if "gzip" in environ.get("HTTP_ACCEPT_ENCODING", ""):
            # Level 1: a tenth of the default's CPU, and ~5 % larger than it.
            body = gzip.compress(body, compresslevel=1)
            headers.append(("Content-Encoding", "gzip"))
        headers.append(("Content-Length", str(len(body))))
        start_response("200 OK", headers)
        return [body]

    def start(self) -> None:
        from wsgiref.simple_server import WSGIRequestHandler, make_server

        from prometheus_client.exposition import ThreadingWSGIServer

        from sattui.metrics.exposition import Renderer

        class Quiet(WSGIRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # no line per scrape on stderr
                pass

        class Server(ThreadingWSGIServer):
            address_family = socket.AF_INET6 if ":" in self.address[0] else socket.AF_INET

        self._renderer = Renderer()
        host, port = self.address
        try:
            self._httpd = make_server(host, port, self.app, Server, handler_class=Quiet)
        except OSError as e:
            why = {errno.EADDRINUSE: "the port is in use", errno.EADDRNOTAVAIL: "no such address on this machine",
                   errno.EACCES: "permission denied"}.get(e.errno or 0, e.strerror or str(e))
            raise SattuiError(f"cannot serve metrics on {self.where}: {why}") from None
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="sattui-metrics", daemon=True)
        self._thread.start()

    @property
    def where(self) -> str:
        host, port = self.address
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    @property
    def port(self) -> int:
        """The bound port (the one given; the real one when 0 was asked, in tests)."""
        if self._httpd is not None:
            return int(self._httpd.server_address[1])
        return self.address[1]

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None
