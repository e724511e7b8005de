"""The box-table reader: nvidia-smi-like listings that several vendor tools print.

cnmon, npu-smi, Kunlunxin's xpu-smi, mthreads-gmi and (a guess) brsmi all imitate
nvidia-smi's boxes. Their cells are matched to their header by *name*, not column
number, so a column moving or a new one appearing does not shift every value by one.
``parse_box_listing`` reads a whole listing (card table, then process table) into
readings, given a ``BoxLayout`` that says which columns the tool names how.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from sattui.vendors.reading import CardReading, add_proc
from sattui.vendors.tool import first_line
from sattui.vendors.values import is_na, layout_error, mem_pair, one_line, parse_pct, temp_c, to_bytes, to_index, watts

# A rule line: "+----+----+", "|====|====|", "-------": only these characters, and at
# least three dashes/equals in a row, so a row of "-" values is not taken for a rule.
_RULE_CHARS = frozenset("-=+| \t")
# Header labels are separated by two or more spaces ("Volatile Uncorr. ECC" is one).
_LABEL_RE = re.compile(r"\S+(?: \S+)*")
# A value is either a "used / total" pair ("0    / 0", "106 W/ 250 W", "0MiB / 98304MiB",
# "N/A / 400W") — padding inside a pair varies with the digits — or a run of words
# separated by single spaces ("P800 OAM", "On-die, EDC").
_NUM_OR_NA = r"(?:\d+(?:\.\d+)?|N/A|NA|-)"
_UNIT = r"(?: ?(?:[KMGT]i?B|W|C|%)(?![A-Za-z]))?"
_VALUE_RE = re.compile(rf"(?P<pair>{_NUM_OR_NA}{_UNIT}\s*/\s*{_NUM_OR_NA}{_UNIT})(?![\w.])|\S+(?: \S+)*")
_NO_PROCS_RE = re.compile(r"no running process", re.I)


def norm_label(label: str) -> str:
    """A header label as a dict key: lower case, single spaces."""
    return " ".join(label.lower().split())


def is_rule(line: str) -> bool:
    # A set test, not a regex: linear on any line, however long.
    return ("---" in line or "===" in line) and set(line.rstrip("\r\n")) <= _RULE_CHARS


def split_cells(line: str, boxed: bool) -> list[str] | None:
    """The cells of one table line, or None if a boxed line is not closed on both sides.

    Boxed tables ("| a | b |") lose their outer bars; an unclosed line there means the
    output was cut. Unboxed tables (mthreads-gmi: "0  MTT S5000  |PCIe  |%GPU") keep
    their leading cell, which may be blank.
    """
    s = line.rstrip()
    if boxed:
        t = s.lstrip()
        if len(t) < 2 or t[0] != "|" or t[-1] != "|":
            return None
        return t[1:-1].split("|")
    return s.split("|")


def _labels(cell: str) -> list[tuple[str, int, int]]:
    return [(m.group(), m.start(), m.end()) for m in _LABEL_RE.finditer(cell)]


def _values(cell: str, words: bool, pairs: bool = True) -> list[tuple[str, int, int]]:
    """Value tokens with their spans; ``words`` splits multi-word values (not pairs);
    without ``pairs`` a lone "/" is a value of its own (cnmon's VF column)."""
    if not pairs:
        return [(m.group(), m.start(), m.end()) for m in _LABEL_RE.finditer(cell)]
    out: list[tuple[str, int, int]] = []
    for m in _VALUE_RE.finditer(cell):
        if words and m.group("pair") is None and " " in m.group():
            out.extend((w.group(), m.start() + w.start(), m.start() + w.end()) for w in re.finditer(r"\S+", m.group()))
        else:
            out.append((m.group(), m.start(), m.end()))
    return out


def map_cell(header_cell: str, value_cell: str) -> dict[str, str]:
    """Match one cell's values to its header labels.

    Same count: in order (robust to a column printed one space off). "a / b" is one
    value (a used/total pair) unless reading it as three makes the count fit ("0  /
    4242" is card 0, VF "/", pid 4242 in cnmon's process table). Otherwise by position:
    each word goes to the label it overlaps most, or the nearest one — that keeps
    "00000000:03:00.0 N/A" apart under "Bus-Id  Disp.A" and a blank value blank.
    """
    labels = _labels(header_cell)
    if not labels:
        return {}
    out: dict[str, str] = {}
    for pairs in (True, False):
        values = _values(value_cell, words=False, pairs=pairs)
        if len(values) == len(labels):
            for (lab, _, _), (val, _, _) in zip(labels, values):
                out.setdefault(norm_label(lab), val)
            return out
    for val, vs, ve in _values(value_cell, words=True):
        def score(lab: tuple[str, int, int], vs: int = vs, ve: int = ve) -> int:
            _, ls, le = lab
            overlap = min(ve, le) - max(vs, ls)
            return overlap if overlap > 0 else -max(ls - ve, vs - le, 0)

        key = norm_label(max(labels, key=score)[0])
        out[key] = f"{out[key]} {val}" if key in out else val
    return out


def map_row(header_line: str, line: str, boxed: bool) -> dict[str, str] | None:
    """One data line read against one header line; None if their cells do not line up."""
    hc = split_cells(header_line, boxed)
    vc = split_cells(line, boxed)
    if hc is None or vc is None or len(hc) != len(vc):
        return None
    rec: dict[str, str] = {}
    for h, v in zip(hc, vc):
        for k, val in map_cell(h, v).items():
            rec.setdefault(k, val)
    return rec


@dataclass
class TextTable:
    """A table read by ``read_table``: one dict per record, keys = normalised labels."""

    header: list[str]
    records: list[dict[str, str]]
    end: int  # index of the first line after the table


def find_header(lines: Sequence[str], start: int, is_header: Callable[[set[str]], bool]) -> int | None:
    """The index of the first line at or after ``start`` whose labels satisfy ``is_header``."""
    for i in range(start, len(lines)):
        ln = lines[i]
        if not ln.strip() or is_rule(ln):
            continue
        cells = split_cells(ln, ln.lstrip().startswith("|"))
        if cells is None:
            continue
        if is_header({norm_label(lab) for c in cells for lab, _, _ in _labels(c)}):
            return i
    return None


def read_table(lines: Sequence[str], start: int, is_header: Callable[[set[str]], bool], *,
               rows_per_record: int | None = None, stop: Callable[[str], bool] | None = None,
               what: str = "table") -> TextTable | None:
    """Find a header whose labels satisfy ``is_header`` at or after ``start``, read its rows.

    The header is that line and the ones below it up to the first rule; a record is
    ``rows_per_record`` lines (default: as many as the header has), each read against
    the header line at the same position. Rules between records are skipped; the table
    ends at a blank line, a line that is not a row, or a line ``stop`` accepts. None if
    no header is found; a ``ParseError`` if the table is cut or its rows do not match
    the header (never a half-read record).
    """
    h0 = find_header(lines, start, is_header)
    if h0 is None:
        return None
    boxed = lines[h0].lstrip().startswith("|")
    j = h0
    while j < len(lines) and lines[j].strip() and not is_rule(lines[j]):
        j += 1
    if j >= len(lines) or not is_rule(lines[j]):
        raise layout_error(f"{what}: header {one_line(lines[h0].strip())} is not followed by a rule")
    header = list(lines[h0:j])
    per = rows_per_record or len(header)
    records: list[dict[str, str]] = []
    group: list[str] = []
    i = j
    while i < len(lines):
        ln = lines[i]
        if is_rule(ln):
            if group:
                raise layout_error(f"{what}: record cut short at {one_line(group[-1].strip())}")
            i += 1
            continue
        if not ln.strip():
            break
        if boxed and not ln.lstrip().startswith("|"):
            break
        if not group and stop is not None and stop(ln):
            break
        if not group and _NO_PROCS_RE.search(ln):  # "No running processes found": no record
            i += 1
            continue
        group.append(ln)
        if len(group) == per:
            rec: dict[str, str] = {}
            for r, row in enumerate(group):
                m = map_row(header[min(r, len(header) - 1)], row, boxed)
                if m is None:
                    raise layout_error(f"{what}: row {one_line(row.strip())} does not match the header")
                for k, v in m.items():
                    rec.setdefault(k, v)
            records.append(rec)
            group = []
        i += 1
    if group:
        raise layout_error(f"{what}: output ends inside a record ({one_line(group[-1].strip())})")
    return TextTable(header, records, i)


def find_key(rec: dict[str, str], *names: str, contains: Sequence[str] = ()) -> str | None:
    """The first of ``names`` present in ``rec``, else the first key containing one of ``contains``."""
    for n in names:
        if n in rec:
            return n
    for c in contains:
        for k in rec:
            if c in k:
                return k
    return None



def split_pair(value: str | None, what: str) -> tuple[str | None, str | None]:
    """'used / total' → ('used', 'total'); N/A or missing → (None, None)."""
    if value is None or is_na(value):
        return None, None
    m = re.fullmatch(r"\s*(N/A|[^/]*?)\s*/\s*(N/A|[^/]*?)\s*", value, re.I)
    if m is None:
        raise layout_error(f"{what}: {one_line(value)} is not 'used / total'")
    return m.group(1), m.group(2)


def split_paren(value: str | None, what: str) -> tuple[str | None, str | None]:
    """'used(total)' (mthreads-gmi) → ('used', 'total')."""
    if value is None or is_na(value):
        return None, None
    m = re.fullmatch(r"\s*([^()]*?)\s*\(\s*([^()]*?)\s*\)\s*", value)
    if m is None:
        raise layout_error(f"{what}: {one_line(value)} is not 'used(total)'")
    return m.group(1), m.group(2)



# -- one whole listing (card table, then process table) into readings ---------------------

@dataclass(frozen=True)
class Column:
    """Where one value sits in a table record: under the first of ``names`` the record
    has, else under the first label containing one of ``contains`` (tool versions word
    their headers differently). ``label`` names the value in errors; None names it by
    the label found, for layouts that are only guessed."""

    names: tuple[str, ...] = ()
    contains: tuple[str, ...] = ()
    label: str | None = None

    def key(self, rec: dict[str, str]) -> str | None:
        return find_key(rec, *self.names, contains=self.contains)

    def cell(self, rec: dict[str, str]) -> str | None:
        key = self.key(rec)
        return rec.get(key) if key else None

    def read(self, rec: dict[str, str], where: str = "") -> tuple[str | None, str]:
        """The cell and how an error names it ("card 0 Util"; with no ``where``, "Card")."""
        key = self.key(rec)
        name = self.label or str(key)
        return (rec.get(key) if key else None), (f"{where} {name}" if where else name)


# nvidia-smi's own power and memory cells, which the tools that imitate it keep.
NVSMI_POWER = Column(("pwr:usage/cap",), ("pwr",), "Pwr")
NVSMI_MEMORY = Column(("memory-usage",), label="Memory-Usage")
PROCESS_PID = Column(("pid",), label="process PID")
PROCESS_MEMORY = Column(contains=("memory", "usage"))
# A vendor's reader for cells its tool prints its own way: fn(reading, record, "GPU 0").
ReadMore = Callable[[CardReading, dict[str, str], str], None]


@dataclass(frozen=True)
class BoxLayout:
    """One tool's nvidia-smi-like listing: how its card table is found, and which
    columns hold what. Power and memory default to nvidia-smi's "used / total" pairs;
    a tool that prints them otherwise sets them to None and reads them in ``read_more``.
    """

    what: str  # the table, as errors name it ("card table")
    missing: str  # why no header matched ("no card table (a header with 'Card' and 'Name')")
    is_header: Callable[[set[str]], bool]
    card_word: str  # a card, as errors name it ("card" → "card 0 Temp")
    index: Column  # the card number in the card table
    process_card: Column  # the card number in the process table
    util: Column
    bus: Column = Column(("bus-id",))
    temp: Column = Column(("temp",), label="Temp")
    power: Column | None = NVSMI_POWER
    memory: Column | None = NVSMI_MEMORY
    read_more: ReadMore | None = None
    # A process row with a blank card cell belongs to the card of the row above
    # (Kunlunxin's 4.x drivers print the DevID once per card).
    process_card_carries: bool = False


def read_card_table(text: str, is_header: Callable[[set[str]], bool], *, what: str, missing: str,
                    rows_per_record: int | None = None,
                    stop: Callable[[str], bool] | None = None) -> tuple[list[str], TextTable]:
    """``text``'s lines and its card table (see ``read_table``). No matching header is a
    ``ParseError`` quoting how the output starts: the tool printed something else."""
    lines = text.splitlines()
    table = read_table(lines, 0, is_header, rows_per_record=rows_per_record, stop=stop, what=what)
    if table is None:
        raise layout_error(f"{missing}; output starts {one_line(first_line(text))}")
    return lines, table


def reading_from_record(rec: dict[str, str], layout: BoxLayout) -> CardReading:
    """One card table record as a reading; its processes come from ``attach_processes``."""
    idx = to_index(*layout.index.read(rec))
    where = f"{layout.card_word} {idx}"
    r = CardReading(index=idx, name=rec.get("name"), bus=layout.bus.cell(rec))
    r.util = parse_pct(*layout.util.read(rec, where))
    r.temp_c = temp_c(*layout.temp.read(rec, where))
    if layout.power is not None:
        power_text, power_what = layout.power.read(rec, where)
        used, cap = split_pair(power_text, power_what)
        r.power_w = watts(used, f"{power_what}:Usage")
        r.power_limit_w = watts(cap, f"{power_what}:Cap")
    if layout.memory is not None:
        mem_text, mem_what = layout.memory.read(rec, where)
        r.mem_used, r.mem_total = mem_pair(*split_pair(mem_text, mem_what), mem_what)
    if layout.read_more is not None:
        layout.read_more(r, rec, where)
    return r


def _lists_pids(labels: set[str]) -> bool:
    return "pid" in labels


def attach_processes(lines: Sequence[str], start: int, readings: Iterable[CardReading],
                     owner: Callable[[dict[str, str]], CardReading | None], *,
                     is_header: Callable[[set[str]], bool] = _lists_pids, pid: Column = PROCESS_PID,
                     memory: Column = PROCESS_MEMORY) -> None:
    """The process table at or after ``start`` into the readings' ``procs`` (pid → bytes).

    With a process table every reading's ``procs`` is known (``{}``: no row names its
    card); without one it stays ``None`` (unknown, not empty). ``owner`` is the reading
    a row belongs to, or None for a card the listing did not show (the row raced it).
    """
    table = read_table(lines, start, is_header, rows_per_record=1, what="process table")
    if table is None:
        return
    for r in readings:
        r.procs = {}
    for rec in table.records:
        card = owner(rec)
        pid_n = to_index(*pid.read(rec))
        mem = to_bytes(memory.cell(rec), "MiB", what=f"process {pid_n} memory")
        if card is not None:
            add_proc(card.procs, pid_n, mem)  # type: ignore[arg-type]


def parse_box_listing(text: str, layout: BoxLayout) -> dict[int, CardReading]:
    """A tool's nvidia-smi-like listing → one reading per card, keyed by card number,
    processes included when the listing has a process table (see ``attach_processes``)."""
    lines, table = read_card_table(text, layout.is_header, what=layout.what, missing=layout.missing)
    out: dict[int, CardReading] = {}
    for rec in table.records:
        r = reading_from_record(rec, layout)
        out[r.index] = r
    above: list[CardReading | None] = []  # the card of the last process row, once there is one

    def owner(rec: dict[str, str]) -> CardReading | None:
        cell, what = layout.process_card.read(rec)
        if cell is None and layout.process_card_carries and above:
            return above[0]
        above[:] = [out.get(to_index(cell, what))]
        return above[0]

    attach_processes(lines, table.end, out.values(), owner)
    return out
