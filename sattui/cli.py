"""Command line: ``sattui record | report | doctor``.

Every failure a user can cause ends with one line on stderr and a non-zero exit.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from collections.abc import Sequence

from sattui import __version__
from sattui.errors import SattuiError
from sattui.vendors.base import BACKEND_NAMES

PROG = "sattui"


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


def _backend_name(text: str) -> str:
    if text not in BACKEND_NAMES or text == "sim":
        raise argparse.ArgumentTypeError(
            f"unknown backend {text!r}; one of: {', '.join(n for n in BACKEND_NAMES if n != 'sim')}")
    return text


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, as argparse does, minus the usage block
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="Are your accelerators saturated, and if not, what is the "
                                       "training job waiting for?")
    p.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    rec = sub.add_parser("record", help="record a trainer and the cards headless to a JSONL file",
                         description="Record a running trainer (--pid), one started here (-- CMD ...), "
                                     "or the cards only (neither). "
                                     "Ends on --duration, on the trainer's exit, or on Ctrl-C/SIGTERM, "
                                     "always leaving a readable file.")
    rec.add_argument("--pid", type=_pid, help="the trainer's process id")
    rec.add_argument("-o", "--output", required=True, metavar="FILE", help="recording to write (JSON Lines)")
    rec.add_argument("--duration", type=_positive_float, metavar="S", help="stop after S seconds")
    rec.add_argument("--interval", type=_positive_float, default=1.0, metavar="S",
                     help="process sampling interval (default 1.0 s)")
    rec.add_argument("--rate", type=_positive_float, default=None, metavar="HZ",
                     help="py-spy sampling rate (default: see docs/sampling.md)")
    rec.add_argument("--no-stacks", action="store_true", help="do not run py-spy (processes only)")
    rec.add_argument("--backend", default="auto", metavar="NAME", type=_backend_name,
                     help=f"card backend: {', '.join(n for n in BACKEND_NAMES if n != 'sim')} (default auto)")
    rec.add_argument("--card-interval", type=_positive_float, default=None, metavar="S",
                     help="card sampling interval (default 0.5 s, or slower for slow vendor tools)")

    rep = sub.add_parser("report", help="summarise a recording", description="Summarise a recording.")
    rep.add_argument("file", metavar="FILE")
    rep.add_argument("--json", action="store_true", help="print sattui.report/1 JSON")

    doc = sub.add_parser("doctor", help="what works on this machine, and why not",
                         description="Check permissions and tools sattui needs.")
    doc.add_argument("--json", action="store_true")
    return p


def _split_command(argv: list[str]) -> tuple[list[str], list[str] | None]:
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, None


def _err(msg: str) -> None:
    print(f"{PROG}: {msg}", file=sys.stderr, flush=True)


def cmd_record(args: argparse.Namespace, command: list[str] | None) -> int:
    from sattui.recorder import RecordOptions, Recorder
    from sattui.trainer.procs import resolve_pid
    from sattui.trainer.stacks import DEFAULT_RATE_HZ

    if args.pid is not None and command:
        raise SattuiError("record takes --pid PID or -- CMD ..., not both")
    if args.pid is None and not command and args.backend == "none":
        raise SattuiError("nothing to record: give --pid PID, -- CMD ..., or a card --backend")
    opts = RecordOptions(out_path=args.output, duration_s=args.duration, interval_s=args.interval,
                         rate_hz=args.rate or DEFAULT_RATE_HZ, stacks=not args.no_stacks, backend=args.backend)
    if args.card_interval:
        opts.card_interval_s = args.card_interval
    _check_writable(args.output)
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

    def on_signal(signum: int, _frame: object) -> None:
        rec.request_stop(signal.Signals(signum).name)

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        result = rec.run()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    extra = ""
    if result.trainer_exit_code is not None:
        extra = f", trainer exit code {result.trainer_exit_code}"
    _err(f"recorded {result.duration_s:.1f} s to {args.output} ({result.records} records; "
         f"ended by {result.ended_by}{extra})")
    return 0


def _check_writable(path: str) -> None:
    """Fail before starting anything when the output cannot be created."""
    d = os.path.dirname(os.path.abspath(path)) or "."
    if os.path.isdir(path):
        raise SattuiError(f"cannot write {path}: is a directory")
    if not os.path.isdir(d):
        raise SattuiError(f"cannot write {path}: no such directory {d}")
    if not os.access(d, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise SattuiError(f"cannot write {path}: permission denied")


def cmd_report(args: argparse.Namespace) -> int:
    from sattui import report

    rep, warnings = report.build_report(args.file)
    for w in warnings:
        _err(f"warning: {w}")
    print(report.format_json(rep) if args.json else report.format_text(rep))
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from sattui import doctor

    d = doctor.run_doctor()
    print(doctor.format_json(d) if args.json else doctor.format_text(d))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    own, command = _split_command(argv)
    parser = build_parser()
    args = parser.parse_args(own)
    if command is not None and args.command != "record":
        _err("error: `-- CMD` is only supported by `sattui record` so far")
        return 2
    try:
        if args.command == "record":
            return cmd_record(args, command)
        if args.command == "report":
            return cmd_report(args)
        if args.command == "doctor":
            return cmd_doctor(args)
        parser.print_help()
        return 2
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
