"""Kunlunxin XPUs (P800, R200, K200 …) through Kunlunxin's ``xpu-smi`` (also installed as ``xpu_smi``).

Two layouts of its default view are read, told apart by their header.

Drivers ≥ 5: an nvidia-smi clone with a third row per card::

    | XPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
    | Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | XPU-Util  Compute M. |
    |                               |             L3-Usage |            SR-IOV M. |
    |   0  P800 OAM           N/A   | 00000000:03:00.0 N/A |                    0 |
    | N/A   37C  N/A     85W / 400W |      0MiB / 98304MiB |      0%      Default |
    |                               |      0MiB /    96MiB |             Disabled |

4.x drivers: version lines, then a DEVICES table of one row per device (a K200 board
is two devices on one PCI address), a VIDEO table and a PROCESSES table whose DevID
is printed once per device::

    Runtime Version: 4.33
    Driver Version: 4.33
    | DevID |   PCI Addr   | Model | … | UseRate |    L3     |   Memory    | Power(W) | Temp | Freq(MHz) | …
    |     0 | 0000:43:00.0 | K200  | … |     0 % | 0 / 16 MB | 0 / 8064 MB |       38 |   37 |       900 | …

In both, "Memory" is the device memory; L3 is on-chip SRAM, not "memory".

Intel's XPU Manager ships a tool of the same name; ``sattui.vendors.xpu_smi`` tells
which one is on PATH from what it prints (never from the name), and the intel backend
asks the same function, so exactly one of the two claims a given ``xpu-smi``.
"""

from __future__ import annotations

from dataclasses import dataclass

from sattui.vendors.backend import BackendUnavailable, Probe, ToolError, register
from sattui.vendors.box_table import NVSMI_MEMORY, BoxLayout, Column, find_header, parse_box_listing
from sattui.vendors.cli_backend import CliBackend
from sattui.vendors.reading import CardReading
from sattui.vendors.tool import Tool, find_tool, first_line, run_tool, search_version
from sattui.vendors.values import expect_unit, one_line, watts
from sattui.vendors.xpu_smi import INTEL, KUNLUN, identify_xpu_smi

XPU_SMI_NAMES = ("xpu-smi", "xpu_smi")
KUNLUN_DIRS = ("/usr/local/xpu/bin", "/usr/local/bin", "/usr/bin")
INTEL_REASON = "xpu-smi on PATH is Intel's XPU Manager, not Kunlunxin's (the intel backend reads it)"

def xpu_smi_version(text: str) -> str | None:
    """Kunlunxin's header names no tool version, only the driver's: 'driver 5.0.21.26'."""
    v = search_version(text, r"Driver Version:\s*v?(\d[\w.\-]*)")
    return f"driver {v}" if v else None


def _is_card_header(labels: set[str]) -> bool:
    return "xpu" in labels and "name" in labels


XPU_SMI_LAYOUT = BoxLayout(
    what="XPU table",
    missing="no XPU table (a header with 'XPU' and 'Name')",
    is_header=_is_card_header,
    card_word="XPU",
    index=Column(("xpu",), label="XPU"),
    process_card=Column(("xpu", "gpu"), label="process XPU"),
    util=Column(("xpu-util",), ("util",), "XPU-Util"),
    # Memory-Usage is the HBM; the third row's L3-Usage is on-chip SRAM, not "memory".
    memory=NVSMI_MEMORY,
)


def _is_v4_header(labels: set[str]) -> bool:
    return "devid" in labels and "userate" in labels


def _read_v4_cells(r: CardReading, rec: dict[str, str], where: str) -> None:
    """The 4.x table's own cells: the model, bare watts, the clock."""
    r.name = rec.get("model")
    r.power_w = watts(rec.get("power(w)"), f"{where} Power(W)")
    r.sm_clock_mhz = expect_unit(rec.get("freq(mhz)"), ("MHz",), f"{where} Freq(MHz)")


XPU_SMI_V4_LAYOUT = BoxLayout(
    what="DEVICES table",
    missing="no DEVICES table (a header with 'DevID' and 'UseRate')",
    is_header=_is_v4_header,
    card_word="DevID",
    index=Column(("devid",), label="DevID"),
    process_card=Column(("devid",), label="process DevID"),
    util=Column(("userate",), label="UseRate"),
    bus=Column(("pci addr",)),
    power=None,  # "Power(W)": a bare number, no cap
    memory=Column(("memory",), label="Memory"),
    read_more=_read_v4_cells,
    process_card_carries=True,
)


def parse_xpu_smi(text: str) -> dict[int, CardReading]:
    """Kunlunxin ``xpu-smi`` (no arguments), either layout → one reading per XPU.

    ``procs`` is ``{}`` for every card when the process table lists nothing, ``None``
    when the output has no process table.
    """
    if find_header(text.splitlines(), 0, _is_v4_header) is not None:
        return parse_box_listing(text, XPU_SMI_V4_LAYOUT)
    return parse_box_listing(text, XPU_SMI_LAYOUT)


@dataclass
class Located:
    """What looking for Kunlunxin's tool found (see ``locate_kunlun``)."""

    path: str | None = None  # the tool to use (its kind may be unclear: ``text`` decides)
    text: str | None = None  # its default output, already read once
    why: str = ""  # why none is usable, one line
    failure: ToolError | None = None  # a candidate that hung or failed (not Intel's)
    intel: bool = False  # an xpu-smi on PATH is Intel's


def locate_kunlun(timeout_s: float) -> Located:
    """The first ``xpu-smi``/``xpu_smi`` that is Kunlunxin's, told by its default output.

    A tool whose output cannot be told apart is returned too (with its text) so
    discovery can name its version in a ``ParseError``; Intel's never is.
    """
    found = Located()
    reasons: list[str] = []
    unclear: tuple[str, str] | None = None
    for name in XPU_SMI_NAMES:
        path = find_tool(name, KUNLUN_DIRS)
        if path is None:
            continue
        try:
            run = run_tool([path], timeout_s=timeout_s, ok_codes=tuple(range(0, 256)))
        except BackendUnavailable as e:  # found but not runnable (permissions)
            reasons.append(str(e))
            continue
        except ToolError as e:
            reasons.append(str(e))
            found.failure = found.failure or e
            continue
        text = run.stdout + "\n" + run.stderr
        kind = identify_xpu_smi(text)
        if kind == INTEL:
            reasons.append(INTEL_REASON if name == "xpu-smi" else INTEL_REASON.replace("xpu-smi", name, 1))
            found.intel = True
            continue
        if run.returncode != 0:
            msg = f"{name} exited {run.returncode}: {first_line(text)[:120]}"
            reasons.append(msg)
            found.failure = found.failure or ToolError(msg)
            continue
        if kind == KUNLUN:
            return Located(path, run.stdout)
        reasons.append(f"{name} printed no Kunlunxin table (starts {one_line(first_line(text))})")
        unclear = unclear or (path, run.stdout)
    found.why = "; ".join(reasons) or "xpu-smi (Kunlunxin) not found"
    if unclear is not None:
        found.path, found.text = unclear
    return found


@register
class KunlunBackend(CliBackend):
    name = "kunlun"
    vendor = "kunlunxin"
    auto_rank = 60
    # xpu-smi queries every XPU through the driver: ~0.2–0.5 s a call.
    min_interval_s = 1.0
    tools = XPU_SMI_NAMES
    list_args = ()

    parse = staticmethod(parse_xpu_smi)
    header_version = staticmethod(xpu_smi_version)
    _located_text: str | None = None  # the answer read while telling the tool apart

    @classmethod
    def probe(cls) -> Probe:
        try:
            loc = locate_kunlun(cls.default_timeout_s)
            if loc.path is None or loc.text is None or identify_xpu_smi(loc.text) != KUNLUN:
                return Probe(cls.name, False, loc.why, None, loc.path)
            return Probe(cls.name, True, None, xpu_smi_version(loc.text), loc.path)
        except Exception as e:  # a probe must never take doctor down
            return Probe(cls.name, False, f"probe failed: {type(e).__name__}: {e}")

    def _tool(self) -> Tool:
        if self.tool is None:
            loc = locate_kunlun(self.timeout_s)
            if loc.path is None:
                # A Kunlunxin-looking candidate that hung or crashed is a tool failure
                # (the caller retries); Intel's tool or none at all is "not here".
                if loc.failure is not None and not loc.intel:
                    raise ToolError(loc.why)
                raise BackendUnavailable(loc.why)
            self.tool = Tool("xpu-smi", loc.path, self.timeout_s, header_version=xpu_smi_version)
            self._located_text = loc.text
        return self.tool

    def read(self) -> dict[int, CardReading]:
        tool = self._tool()
        # Telling Kunlunxin's tool from Intel's already ran it once; parse that answer
        # rather than asking again.
        text, self._located_text = self._located_text, None
        if text is not None:
            return tool.parse(parse_xpu_smi, text)
        return tool.run_parse((), parse_xpu_smi)
