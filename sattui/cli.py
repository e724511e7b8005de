"""Command line: the monitor (``sattui [--pid PID | -- CMD]``), ``replay``, ``demo``,
``record``, ``report``, ``export``, ``doctor``.

Every failure a user can cause ends with one line on stderr and a non-zero exit. The
full-screen UI (Textual) is imported only by the monitor commands, so ``record``,
``report`` and ``doctor`` stay headless.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from sattui import __version__
from sattui.errors import SattuiError
from sattui.safefile import FORCE_FLAG, check_output, open_output
from sattui.textsafe import clean
from sattui.vendors.backend import AUTO, NONE, backend_names

if TYPE_CHECKING:  # the recorder is imported where a command needs it (start-up cost)
    from sattui.recorder import Recorder, RecordResult

PROG = "sattui"
# Error lines quote paths and tools' output: cut, so one line stays one screen line or few.
ERROR_MAX = 600
FORCE_HELP = "replace an existing output file (never a symbolic link; see docs/security.md)"
# `replay` and `demo` stay out of --help until the full-screen monitor is released
# (README: commands appear in --help when they work); they run either way.
SHOW_MONITOR_IN_HELP = True
MONITOR_COMMANDS = ("replay", "demo")


# `sattui` alone on a machine without an accelerator: where to go from here, not the
# list of every backend that found nothing (`sattui doctor` gives that).
NOTHING_TO_WATCH = f"""{PROG}: no accelerator found here, and no trainer to watch.
  watch a training job:  {PROG} --pid PID   (or: {PROG} -- python train.py)
  see it work:           {PROG} demo        (a bundled trainer, SIMULATED card)
  why no accelerator:    {PROG} doctor
"""


def _positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
    return v


def _pid(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a pid: {text!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"not a pid: {text!r}")
    return v


def _metrics_address(text: str) -> tuple[str, int]:
    from sattui.metrics.server import parse_address

    try:
        return parse_address(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _host_name(text: str) -> str:
    # The `host` label of every series: one printable line, as a host name is.
    if not text or len(text) > 253 or any(c.isspace() or not c.isprintable() for c in text):
        raise argparse.ArgumentTypeError(f"not a host name: {text!r}")
    return text


def _label_value(text: str) -> str:
    # A label matcher's value: an empty one would match every series without the label.
    if not text or len(text) > 200 or any(not c.isprintable() for c in text):
        raise argparse.ArgumentTypeError(f"not a job id: {text!r}")
    return text


def _webhook_url(text: str) -> str:
    from sattui.notify import check_webhook_url

    try:
        return check_webhook_url(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _on_finding_command(text: str) -> list[str]:
    from sattui.notify import parse_command

    try:
        return parse_command(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


WEBHOOK_HELP = ("POST each finding reaching medium or high, and its clearing, to URL as JSON (Slack-compatible "
                "`text`; at most one message per finding per 10 min; docs/format.md)")
ON_FINDING_HELP = ("run CMD (split as a shell would, run without one) for each such finding, with it in the "
                   "environment (SATTUI_RULE, SATTUI_SEVERITY, ..., SATTUI_FINDING_JSON)")
METRICS_HELP = "serve Prometheus metrics on HOST:PORT (docs/cluster.md); no listener without it"
HOST_HELP = "the `host` label of the metrics (default: this machine's host name)"


def _backend_name(text: str) -> str:
    # argparse runs this on the default too: "auto" must not import every backend.
    if text not in (AUTO, NONE) and text not in backend_names():
        raise argparse.ArgumentTypeError(f"unknown backend {text!r}; one of: {_advertised_backends()}")
    return text


def _advertised_backends() -> str:
    # sim is accepted (the outside contract lists it) but not advertised: it shows the demo card.
    return ", ".join(n for n in backend_names() if n != "sim")


class _Formatter(argparse.HelpFormatter):
    # Naming the backends imports every backend module: done when help is printed, not
    # on every start.
    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = super()._get_help_string(action)
        return text.replace("{backends}", _advertised_backends()) if text else text


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:  # one line, exit 2, as argparse does, minus the usage block
        # argparse quotes the user's arguments raw ("unrecognized arguments: …").
        self.exit(2, f"{self.prog}: error: {clean(message, ERROR_MAX)}\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="Are your accelerators saturated, and if not, what is the "
                                       "training job waiting for?",
                epilog=("more commands: `sattui replay FILE` (the monitor over a recording), "
                        "`sattui demo [--scenario NAME]` (a bundled trainer on a SIMULATED card)")
                if SHOW_MONITOR_IN_HELP else None)
    p.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    # The full-screen monitor: no COMMAND. Own dests, so a subcommand's defaults never mix in.
    mon = p.add_argument_group("full-screen monitor (no COMMAND; `-- CMD ARG...` starts CMD and keeps its exit code)")
    mon.add_argument("--pid", dest="mon_pid", type=_pid, metavar="PID", help="watch this running trainer")
    mon.add_argument("--backend", dest="mon_backend", default="auto", metavar="NAME", type=_backend_name,
                     help="card backend (default auto)")
    mon.add_argument("--interval", dest="mon_interval", type=_positive_float, default=1.0, metavar="S",
                     help="process sampling interval (default 1.0 s)")
    mon.add_argument("--rate", dest="mon_rate", type=_positive_float, default=None, metavar="HZ",
                     help="py-spy sampling rate")
    mon.add_argument("--record", dest="mon_record", metavar="FILE", help="also record the session to FILE")
    mon.add_argument("--trainer-log", dest="mon_trainer_log", metavar="FILE",
                     help="with -- CMD: where CMD's output goes (default: a new private directory in the temp "
                          "directory)")
    mon.add_argument(FORCE_FLAG, dest="mon_force", action="store_true", help=FORCE_HELP)
    mon.add_argument("--metrics", dest="mon_metrics", type=_metrics_address, metavar="HOST:PORT", help=METRICS_HELP)
    mon.add_argument("--host", dest="mon_host", type=_host_name, metavar="NAME", help=HOST_HELP)
    mon.add_argument("--webhook", dest="mon_webhook", type=_webhook_url, metavar="URL", help=WEBHOOK_HELP)
    mon.add_argument("--on-finding", dest="mon_on_finding", type=_on_finding_command, metavar="CMD",
                     help=ON_FINDING_HELP)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    rec = sub.add_parser("record", help="record a trainer and the cards headless to a JSONL file",
                         description="Record a running trainer (--pid), one started here (-- CMD ...), "
                                     "or the cards only (neither). "
                                     "Ends on --duration, on the trainer's exit, or on Ctrl-C/SIGTERM, "
                                     "always leaving a readable file.")
    rec.add_argument("--pid", type=_pid, help="the trainer's process id")
    rec.add_argument("-o", "--output", required=True, metavar="FILE", help="recording to write (JSON Lines)")
    rec.add_argument(FORCE_FLAG, action="store_true", help=FORCE_HELP)
    rec.add_argument("--duration", type=_positive_float, metavar="S", help="stop after S seconds")
    rec.add_argument("--interval", type=_positive_float, default=1.0, metavar="S",
                     help="process sampling interval (default 1.0 s)")
    rec.add_argument("--rate", type=_positive_float, default=None, metavar="HZ",
                     help="py-spy sampling rate (default: see docs/sampling.md)")
    rec.add_argument("--no-stacks", action="store_true", help="do not run py-spy (processes only)")
    rec.add_argument("--backend", default="auto", metavar="NAME", type=_backend_name,
                     help="card backend: {backends} (default auto)")
    rec.add_argument("--card-interval", type=_positive_float, default=None, metavar="S",
                     help="card sampling interval (default 0.5 s, or slower for slow vendor tools)")
    rec.add_argument("--metrics", type=_metrics_address, metavar="HOST:PORT", help=METRICS_HELP)
    rec.add_argument("--host", type=_host_name, metavar="NAME", help=HOST_HELP)
    rec.add_argument("--webhook", type=_webhook_url, metavar="URL", help=WEBHOOK_HELP)
    rec.add_argument("--on-finding", type=_on_finding_command, metavar="CMD", help=ON_FINDING_HELP)

    rep = sub.add_parser("report", help="summarise a recording, or a whole job from Prometheus",
                         description="Summarise a recording (FILE), or a whole job over a time range from "
                                     "Prometheus (--prometheus URL; docs/cluster.md).")
    rep.add_argument("file", metavar="FILE", nargs="?")
    rep.add_argument("--json", action="store_true", help="print sattui.report/1 JSON")
    rep.add_argument("--prometheus", metavar="URL", help="read the job from this Prometheus server")
    rep.add_argument("--job", metavar="NAME", help="with --prometheus: the scrape job's name")
    rep.add_argument("--run", metavar="ID", help="with --prometheus: torchrun's run id (TORCHELASTIC_RUN_ID)")
    rep.add_argument("--slurm-job", metavar="ID", type=_label_value,
                     help="with --prometheus: the Slurm job id (SLURM_JOB_ID; the slurm_job_id label)")
    rep.add_argument("--since", metavar="DURATION", help="with --prometheus: the window ending now (default 30m)")

    clu = sub.add_parser("cluster", help="the monitor for a whole job, read from Prometheus",
                         description="One row per host (its cards' utilization, each rank's state strip) on one "
                                     "time axis, the job's verdict on top; Enter opens a host (docs/cluster.md).")
    clu.add_argument("--prometheus", required=True, metavar="URL", help="the Prometheus server (http://HOST:PORT)")
    clu.add_argument("--job", metavar="NAME", help="the scrape job's name")
    clu.add_argument("--run", metavar="ID", help="torchrun's run id (TORCHELASTIC_RUN_ID)")
    clu.add_argument("--slurm-job", metavar="ID", type=_label_value,
                     help="the Slurm job id (SLURM_JOB_ID; the slurm_job_id label)")

    exp = sub.add_parser("export", help="a recording as a Chrome/Perfetto JSON trace",
                         description="Write a recording as a Chrome/Perfetto JSON trace (Trace Event Format): "
                                     "state slices per trainer process, counters per card and worker, "
                                     "findings and events as instants (docs/format.md).")
    exp.add_argument("file", metavar="FILE", help="the recording")
    exp.add_argument("--perfetto", required=True, metavar="OUT.json", help="the trace to write")
    exp.add_argument("--force", action="store_true", help="replace OUT.json if it exists")

    doc = sub.add_parser("doctor", help="what works on this machine, and why not",
                         description="Check permissions and tools sattui needs, and what containers and hosts "
                                     "get wrong for a training job (with --pid: for that trainer).")
    doc.add_argument("--pid", type=_pid, metavar="PID",
                     help="check for this trainer: its PID namespace, ptrace access, /dev/shm, NVIDIA devices, "
                          "CPU frequency, cgroup CPU limit against its DataLoader workers")
    doc.add_argument("--json", action="store_true")
    return p


def build_monitor_parser(command: str) -> argparse.ArgumentParser:
    """Parsers of ``replay`` and ``demo`` (kept apart from --help until the UI is released)."""
    p = _Parser(prog=f"{PROG} {command}")
    if command == "replay":
        p.description = "The full-screen monitor over a recording."
        p.add_argument("file", metavar="FILE")
        return p
    from sattui.demo.launch import DEFAULT_SCENARIO, SCENARIOS

    p.description = ("Run the bundled PyTorch example trainer with a SIMULATED card and watch it. "
                     "Scenarios: " + "; ".join(f"{s.name}: {s.about}" for s in SCENARIOS.values()) + ".")
    p.add_argument("--scenario", default=DEFAULT_SCENARIO, metavar="NAME",
                   help=f"one of {', '.join(SCENARIOS)} (default {DEFAULT_SCENARIO})")
    p.add_argument("--headless", action="store_true", help="no screen: record to -o FILE for --duration S")
    p.add_argument("-o", "--output", metavar="FILE", help="with --headless: the recording to write")
    p.add_argument("--duration", type=_positive_float, metavar="S", help="with --headless: stop after S seconds")
    p.add_argument("--interval", type=_positive_float, default=1.0, metavar="S",
                   help="process sampling interval (default 1.0 s)")
    p.add_argument("--rate", type=_positive_float, default=None, metavar="HZ", help="py-spy sampling rate")
    p.add_argument("--record", metavar="FILE", help="also record the session to FILE")
    p.add_argument(FORCE_FLAG, action="store_true", help=FORCE_HELP)
    return p



def _run_until_signal(rec: Recorder) -> RecordResult:
    """Run a recorder with SIGINT/SIGTERM asking it to stop (the file stays readable),
    the previous handlers put back after."""

    def on_signal(signum: int, _frame: object) -> None:
        rec.request_stop(signal.Signals(signum).name)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        return rec.run()
    finally:
        for s, h in old.items():
            signal.signal(s, h)

def _split_command(argv: list[str]) -> tuple[list[str], list[str] | None]:
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, None


def _err(msg: str) -> None:
    # Every message sattui prints on stderr passes here: errors quote paths, tools' output
    # and process names, any of which may carry terminal escapes (sattui/textsafe.py).
    print(f"{PROG}: {clean(msg, ERROR_MAX)}", file=sys.stderr, flush=True)


def cmd_record(args: argparse.Namespace, command: list[str] | None) -> int:
    from sattui.recorder import RecordOptions
    from sattui.trainer.stacks import DEFAULT_RATE_HZ

    if args.pid is not None and command:
        raise SattuiError("record takes --pid PID or -- CMD ..., not both")
    if args.pid is None and not command and args.backend == "none":
        raise SattuiError("nothing to record: give --pid PID, -- CMD ..., or a card --backend")
    opts = RecordOptions(out_path=args.output, duration_s=args.duration, interval_s=args.interval,
                         rate_hz=args.rate or DEFAULT_RATE_HZ, stacks=not args.no_stacks, backend=args.backend,
                         force=args.force)
    if args.card_interval:
        opts.card_interval_s = args.card_interval
    check_output(args.output, args.force)
    opts.make_notifier = _notifier_factory(args.webhook, args.on_finding, args.host, args.output, log=_err)
    server = _start_metrics(args.metrics, args.host)
    if server is not None:
        opts.metrics = server.node
    try:
        return _record(args, command, opts)
    finally:
        if server is not None:
            server.stop()


def _notifier_factory(webhook: str | None, command: list[str] | None, host: str | None, recording: str | None,
                      log: Any = None) -> Any:
    """--webhook / --on-finding: a function (header, engine) -> Notifier, its outcomes
    events of the engine (the recording, the screen); None without either flag."""
    if webhook is None and not command:
        return None
    from sattui.notify import Notifier

    path = os.path.abspath(recording) if recording else None

    def make(header: dict[str, Any], engine: Any) -> Notifier:
        return Notifier(webhook=webhook, command=command, host=host or header.get("host"), recording=path,
                        job=header.get("labels"), on_event=engine.post_event, log=log)

    return make


def _start_metrics(address: tuple[str, int] | None, host: str | None) -> Any:
    """The exporter, bound before anything starts (a port in use is said at once); None
    without --metrics."""
    if address is None:
        return None
    from sattui.metrics.node import NodeMetrics
    from sattui.metrics.server import MetricsServer

    server = MetricsServer(address, NodeMetrics(host))
    server.start()
    _err(f"serving metrics on http://{server.where}/metrics")
    return server


def _record(args: argparse.Namespace, command: list[str] | None, opts: Any) -> int:
    from sattui.recorder import Recorder
    from sattui.trainer.procs import resolve_pid

    child = None
    if command:
        try:
            child = subprocess.Popen(command)
        except OSError as e:
            raise SattuiError(f"cannot start {command[0]}: {e.strerror or e}") from None
        pid = child.pid
    elif args.pid is not None:
        pid = resolve_pid(args.pid)
    else:
        pid = None  # cards only
    rec = Recorder(pid, opts, child=child, log=_err)
    result = _run_until_signal(rec)
    extra = ""
    if result.trainer_exit_code is not None:
        extra = f", trainer exit code {result.trainer_exit_code}"
    _err(f"recorded {result.duration_s:.1f} s to {args.output} ({result.records} records; "
         f"ended by {result.ended_by}{extra})")
    return 0


def _run_ui(session: object) -> int:
    """The full-screen monitor over ``session``; imported here so headless commands never load Textual."""
    try:
        from sattui.app import run_app
    except ImportError as e:
        raise SattuiError(f"the full-screen monitor is not available: {e}") from None
    return run_app(session)  # type: ignore[arg-type]


def cmd_monitor(args: argparse.Namespace, command: list[str] | None) -> int:
    import tempfile

    from sattui.session import LiveSession

    if args.mon_pid is not None and command:
        raise SattuiError("give --pid PID or -- CMD ..., not both")
    if args.mon_pid is None and not command:
        if args.mon_backend == "none":
            raise SattuiError("nothing to watch: give --pid PID, -- CMD ..., or a card --backend")
        if args.mon_backend == "auto":
            # Cards only: say now, not on an empty screen, that there are none (probes are cheap).
            from sattui.vendors.backend import probe_all

            if not any(p.available for p in probe_all()):
                print(NOTHING_TO_WATCH, file=sys.stderr, end="", flush=True)
                return 2
    log = args.mon_trainer_log
    log_dir = None
    if command and log is None:
        # The trainer must not write over the full screen: its output goes to a file, in a
        # directory of its own whose name nobody can guess beforehand (mkdtemp, 0700), so no
        # link can be planted at it. It is kept: the user reads the log afterwards.
        log_dir = tempfile.mkdtemp(prefix="sattui-trainer-")
        log = os.path.join(log_dir, "trainer.log")
    server = None
    try:
        server = _start_metrics(args.mon_metrics, args.mon_host)
        session = LiveSession(pid=args.mon_pid, command=command, backend=args.mon_backend,
                              interval_s=args.mon_interval, rate_hz=args.mon_rate, record_path=args.mon_record,
                              trainer_log=log if command else None, force=args.mon_force,
                              metrics=server.node if server is not None else None,
                              make_notifier=_notifier_factory(args.mon_webhook, args.mon_on_finding, args.mon_host,
                                                              args.mon_record))
        code = _live(session)
    except SattuiError:
        # The command could not start (or nothing did): an empty default log says nothing.
        if log_dir is not None and log is not None and not (os.path.exists(log) and os.path.getsize(log)):
            shutil.rmtree(log_dir, ignore_errors=True)
        raise
    finally:
        if server is not None:
            server.stop()
    if command:
        _err(f"trainer output: {log}")
    return code


def _live(session: object) -> int:
    from sattui.session import LiveSession

    assert isinstance(session, LiveSession)
    session.start()  # a command that cannot start fails here, before the screen
    try:
        code = _run_ui(session)
    finally:
        session.stop()
    if session.record_path:
        _err(f"recorded to {session.record_path}")
    # A trainer we stopped on quit died of a signal (-2): report it as a shell would (130).
    return 128 - code if code < 0 else code


def cmd_replay(args: argparse.Namespace) -> int:
    from sattui.session import ReplaySession

    session = ReplaySession(args.file)
    for w in session.warnings:
        _err(f"warning: {w}")
    _run_ui(session)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from sattui.demo import launch
    from sattui.vendors import sim

    sc = launch.scenario(args.scenario)
    if args.headless:
        if not args.output or not args.duration:
            raise SattuiError("demo --headless needs -o FILE and --duration S")
        check_output(args.output, args.force)
    elif args.output:
        raise SattuiError("-o is for --headless; to record the monitored demo use --record FILE")
    launch.require_torch()
    with launch.CardFile() as card:
        sim.set_card_file(card.path)
        try:
            if args.headless:
                return _demo_headless(args, sc, card.path)
            from sattui.session import LiveSession

            log = os.path.join(card.dir, "trainer.log")
            session = LiveSession(command=launch.trainer_command(sc, card.path, 24 * 3600.0), backend="sim",
                                  interval_s=args.interval, rate_hz=args.rate, record_path=args.record,
                                  trainer_log=log, force=args.force)
            _live(session)
            return 0  # the trainer is ours and was stopped on quit: its exit code says nothing
        finally:
            sim.set_card_file(None)


def _demo_headless(args: argparse.Namespace, sc: object, card_path: str) -> int:
    from sattui.demo.launch import DemoScenario, trainer_command
    from sattui.recorder import Recorder, RecordOptions
    from sattui.trainer.stacks import DEFAULT_RATE_HZ

    assert isinstance(sc, DemoScenario)
    opts = RecordOptions(out_path=args.output, duration_s=args.duration, interval_s=args.interval,
                         rate_hz=args.rate or DEFAULT_RATE_HZ, backend="sim", force=args.force)
    # The trainer outlives the recording; the recorder stops it when the duration ends.
    cmd = trainer_command(sc, card_path, args.duration + 60.0)
    # Its output goes to a log beside the card file: stopping it at the end may make torch's
    # threads print (a worker's connection reset while the DataLoader shuts down), which is
    # not the user's business unless the trainer failed on its own.
    log_path = os.path.join(os.path.dirname(card_path), "trainer.log")
    with os.fdopen(open_output(log_path, False), "wb") as log:
        try:
            child = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        except OSError as e:
            raise SattuiError(f"cannot start the demo trainer: {e.strerror or e}") from None
    rec = Recorder(child.pid, opts, child=child, log=_err)
    try:
        result = _run_until_signal(rec)
    finally:
        if child.poll() is None:  # rec.run() failed before it could stop the trainer
            child.kill()
            child.wait()
    if result.ended_by == "trainer_exited":
        raise SattuiError(f"the demo trainer exited ({result.trainer_exit_code}) after {result.duration_s:.1f} s "
                          f"of {args.duration:g}: {_last_line(log_path)}")
    _err(f"demo {sc.name}: recorded {result.duration_s:.1f} s to {args.output} ({result.records} records; "
         f"ended by {result.ended_by})")
    return 0


def _last_line(path: str) -> str:
    """The last non-empty line of a log (an exception's message ends a traceback)."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - 4096))
            lines = [ln.strip() for ln in f.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    except OSError:
        return "no output"
    return lines[-1] if lines else "no output"


def cmd_report(args: argparse.Namespace) -> int:
    from sattui import report

    if args.prometheus is not None:
        if args.file is not None:
            raise SattuiError("report takes FILE or --prometheus URL, not both")
        from sattui.cluster import prom_report as cluster_report

        print(cluster_report.cmd(args.prometheus, args.job, args.run, args.since or cluster_report.DEFAULT_SINCE,
                                 args.json, slurm_job=args.slurm_job))
        return 0
    if args.file is None:
        raise SattuiError("report needs a recording FILE or --prometheus URL")
    for flag, v in (("--job", args.job), ("--run", args.run), ("--slurm-job", args.slurm_job),
                    ("--since", args.since)):
        if v is not None:
            raise SattuiError(f"{flag} is for --prometheus URL")
    rep, warnings = report.build_report(args.file)
    for w in warnings:
        _err(f"warning: {w}")
    print(report.format_json(rep) if args.json else report.format_text(rep))
    return 0


def cmd_cluster(args: argparse.Namespace) -> int:
    from sattui.cluster.prom import check_url
    from sattui.cluster.view import ClusterPoller

    check_url(args.prometheus)
    poller = ClusterPoller(args.prometheus, args.job, args.run, slurm_job=args.slurm_job)
    # One read before the screen opens: a wrong or unreachable URL is a one-line error
    # here; once the screen is up, a failing read is said on it and the last data stays.
    poller.client.query("vector(1)")
    try:
        from sattui.cluster_app import run_cluster
    except ImportError as e:
        raise SattuiError(f"the full-screen monitor is not available: {e}") from None
    return run_cluster(poller)


def cmd_export(args: argparse.Namespace) -> int:
    from sattui.export_perfetto import export_perfetto

    counts = export_perfetto(args.file, args.perfetto, force=args.force, on_warning=lambda w: _err(f"warning: {w}"))
    _err(f"wrote {args.perfetto}: {counts['slices']} state slices, {counts['counters']} counter points, "
         f"{counts['instants']} findings and events")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from sattui import doctor

    d = doctor.run_doctor(args.pid)
    print(doctor.format_json(d) if args.json else doctor.format_text(d))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    own, command = _split_command(argv)
    if own and own[0] in MONITOR_COMMANDS:
        if command is not None:
            _err(f"error: `-- CMD` is not taken by `sattui {own[0]}`")
            return 2
        args = build_monitor_parser(own[0]).parse_args(own[1:])
        args.command = own[0]
    else:
        args = build_parser().parse_args(own)
    if command is not None and args.command is not None and args.command != "record":
        _err(f"error: `-- CMD` is not taken by `sattui {args.command}`")
        return 2
    try:
        if args.command == "record":
            return cmd_record(args, command)
        if args.command == "report":
            return cmd_report(args)
        if args.command == "doctor":
            return cmd_doctor(args)
        if args.command == "export":
            return cmd_export(args)
        if args.command == "cluster":
            return cmd_cluster(args)
        if args.command == "replay":
            return cmd_replay(args)
        if args.command == "demo":
            return cmd_demo(args)
        return cmd_monitor(args, command)
    except SattuiError as e:
        _err(f"error: {e}")
        return e.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `sattui report f | head`: the reader went away; not an error worth a traceback.
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
