"""A real Prometheus server for tests (Debian's ``prometheus`` package; ``make test``
installs it): started on 127.0.0.1 with a generated config (1 s scrape) and a temporary
data directory, stopped at the end. Also ``promtool`` and small helpers: a free port, a
static file served as an exporter (a captured dcgm-exporter page)."""

from __future__ import annotations

import http.server
import json
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

INSTALL = "install Debian's prometheus package (apt-get install -y prometheus; `make test` does)"


def require(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise AssertionError(f"{tool} not found: {INSTALL}")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def promtool_check(text: str) -> list[str]:
    """``promtool check metrics`` on an exposition: its complaints, one per line."""
    p = subprocess.run([require("promtool"), "check", "metrics"], input=text, capture_output=True, text=True,
                       timeout=60)
    return [x for x in (p.stdout + p.stderr).splitlines() if x.strip()]


class Prometheus:
    """``with Prometheus([targets]) as prom:`` — a server scraping ``targets`` (host:port)
    every second under job ``job``; ``prom.url`` is its address."""

    def __init__(self, targets: list[str] | dict[str, list[str]], job: str = "sattui", port: int | None = None,
                 scrape_interval: str = "1s", rule_files: list[Path] | None = None) -> None:
        # One job's targets, or {job: targets} for several jobs.
        self.targets = targets if isinstance(targets, dict) else {job: targets}
        self.job = job
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.scrape_interval = scrape_interval
        # evaluated every scrape interval too (deploy/prometheus/sattui-rules.yml)
        self.rule_files = [str(p) for p in rule_files or []]
        self.proc: subprocess.Popen[bytes] | None = None
        self.dir: Path | None = None

    def __enter__(self) -> Prometheus:
        self.dir = Path(tempfile.mkdtemp(prefix="sattui-test-prom-"))
        cfg = self.dir / "prometheus.yml"
        # JSON is YAML: no YAML library needed to write the config.
        cfg.write_text(json.dumps({
            "global": {"scrape_interval": self.scrape_interval, "evaluation_interval": self.scrape_interval},
            "rule_files": self.rule_files,
            "scrape_configs": [{"job_name": j, "static_configs": [{"targets": t}]}
                               for j, t in self.targets.items()]}))
        self.log = open(self.dir / "prometheus.log", "wb")
        self.proc = subprocess.Popen([require("prometheus"), f"--config.file={cfg}",
                                      f"--storage.tsdb.path={self.dir / 'data'}",
                                      f"--web.listen-address=127.0.0.1:{self.port}"],
                                     stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"prometheus exited: {(self.dir / 'prometheus.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.3)
        self.__exit__(None, None, None)
        raise AssertionError("prometheus did not become ready in 60 s")

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if getattr(self, "log", None) is not None:
            self.log.close()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)

    def query(self, q: str) -> list[dict]:
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": q})
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.load(r)["data"]["result"]

    def api(self, path: str) -> dict:
        """``/api/v1/<path>``'s data (``rules``, ``alerts``)."""
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}", timeout=10) as r:
            return json.load(r)["data"]

    def wait_for(self, q: str, n: int = 1, timeout: float = 60) -> list[dict]:
        """Until the instant query ``q`` has at least ``n`` series."""
        deadline = time.monotonic() + timeout
        got: list[dict] = []
        while time.monotonic() < deadline:
            got = self.query(q)
            if len(got) >= n:
                return got
            time.sleep(0.5)
        raise AssertionError(f"prometheus: {q!r} has {len(got)} series after {timeout} s, wanted {n}")


class StaticExporter:
    """Serves one fixed exposition text at /metrics (a captured exporter page)."""

    def __init__(self, text: str) -> None:
        body = text.encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.httpd.server_address[1])
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> StaticExporter:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
