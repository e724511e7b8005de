"""Text other people control, made safe to print on a terminal.

sattui usually runs as root and shows text that other users choose: the trainer's
command line, process and thread names, stack frames' function and file names, what a
vendor tool prints. Printed raw, an escape sequence in any of them can retitle the
window, move the cursor to fake or hide lines, or (OSC 52) write the clipboard; a
newline can forge a line of the report. ``ps`` and ``htop`` print such bytes as ``?``
for this reason.

:func:`clean` is the one sanitizer: every character that is not plain visible text is
shown as a Python-style escape (``\\x1b``, ``\\n``, ``\\u202e``), so an escape sequence
prints as inert text and a multi-line command line reads on one line; text longer than
a limit is cut with an ellipsis. Visible text, including non-Latin scripts and
backslashes, is kept unchanged.

Escaped: every character that Unicode's own data calls hidden, read from the ``regex``
package's property tables (one Unicode version for the whole decision, whatever
``unicodedata`` the interpreter ships): C0 and C1 controls and DEL (category Cc), format
characters (Cf: the bidi embeddings, overrides and isolates of "Trojan Source" attacks,
zero-width spaces and joiners, the BOM, soft hyphens, tag characters), line and
paragraph separators (Zl, Zp), lone surrogates (Cs: undecodable bytes read with
``surrogateescape`` show as ``\\xNN``, the byte), private-use characters (Co: their glyph
is whatever a font put there, or nothing), unassigned code points (Cn: nothing to draw
yet, and a later Unicode may make them format characters), and every
Default_Ignorable_Code_Point (DerivedCoreProperties: drawn as nothing, so a name could
hide them; beyond the categories above, the Hangul fillers U+115F, U+1160, U+3164 and
U+FFA0, the Khmer vowels U+17B4 and U+17B5, variation selectors, the combining grapheme
joiner). Spaces other than " " (U+00A0, U+3000) are visible and kept. A backslash is
not escaped, so an argument that holds the four characters ``\\x1b`` reads like one that
held ESC; that ambiguity is the price of keeping visible text as it is.

Recordings and JSON output keep the exact text (JSON escapes it); only what is printed
for a person goes through here. No Textual or Rich here: the headless commands use it.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from typing import Any

ELLIPSIS = "…"
# Longest escape this module writes (\U000e0001): a cut never splits one.
_MAX_ESCAPE = 10
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
# The rule, as Unicode character classes (see the module docstring): C is Unicode's
# "Other" group, exactly Cc, Cf, Cs, Co and Cn (one property lookup per character instead
# of five: twice as fast on non-ASCII text). Everything about which character is hidden
# comes from this one pattern, so from the one Unicode version of the regex package.
# Compiled on first need: importing ``regex`` is a tenth of a second of ``sattui report``'s
# start on a loaded box, and most text (all of ``report --json``) never needs it.
_HIDDEN_PATTERN = r"[\p{C}\p{Zl}\p{Zp}\p{Default_Ignorable_Code_Point}]"
_hidden_re: Any = None


def _hidden() -> Any:
    global _hidden_re
    if _hidden_re is None:
        import regex

        _hidden_re = regex.compile(_HIDDEN_PATTERN)
    return _hidden_re


def _is_hidden(cp: int) -> bool:
    return _hidden().match(chr(cp)) is not None


# Characters sattui's own text uses (a report's dashes, bars, arrows, η): visible by the
# rule above (tests/unit/test_textsafe.py checks each against it), so a line holding only
# these and printable ASCII needs neither the pattern nor the ``regex`` import.
_OWN_VISIBLE = "–—…·×±≤≥≈←→↑↓█▁▂▃▄▅▆▇ηΔµ°"
_DROP_OWN = {ord(c): None for c in _OWN_VISIBLE}


def _escape(cp: int) -> str:
    ch = chr(cp)
    if ch in _NAMED:
        return _NAMED[ch]
    if 0xDC80 <= cp <= 0xDCFF:  # a byte that was not UTF-8, kept by surrogateescape
        return f"\\x{cp - 0xDC00:02x}"
    if cp < 0x100:
        return f"\\x{cp:02x}"
    if cp < 0x10000:
        return f"\\u{cp:04x}"
    return f"\\U{cp:08x}"


class _Table(dict[int, str]):
    """``str.translate`` table built as characters are met: each code point is looked up
    against the rule once per process, then translated at C speed."""

    def __missing__(self, cp: int) -> str:
        out = _escape(cp) if _is_hidden(cp) else chr(cp)
        self[cp] = out
        return out


_TABLE = _Table()


def clean(text: object, limit: int | None = None) -> str:
    """``text`` with every hidden or control character visibly escaped, at most ``limit``
    characters long (cut with ``…``, never inside an escape). Idempotent."""
    s = text if isinstance(text, str) else str(text)
    # Fast path for the usual case: printable ASCII (" " to "~") holds no hidden character.
    # Anything else asks the rule itself (not str.isprintable, whose unicodedata may be
    # another Unicode version) and is translated only where it holds a hidden character.
    if not (s.isascii() and s.isprintable()):
        rest = s.translate(_DROP_OWN)
        if not (rest.isascii() and rest.isprintable()) and _hidden().search(s):
            s = s.translate(_TABLE)
    if limit is None or len(s) <= limit:
        return s
    if limit <= 0:
        return ""
    cut = s[: limit - 1]
    # An escape cut in half would read as a different one: drop the part.
    tail = cut.rfind("\\", max(0, len(cut) - _MAX_ESCAPE + 1))
    if tail >= 0 and _is_cut_escape(s, tail, len(cut)):
        cut = cut[:tail]
    return cut + ELLIPSIS


def _is_cut_escape(s: str, start: int, end: int) -> bool:
    """Does an escape written by this module start at ``start`` and run past ``end``?"""
    for length in (2, 4, 6, 10):
        piece = s[start : start + length]
        if len(piece) == length and start + length > end and _looks_escaped(piece):
            return True
    return False


def _looks_escaped(piece: str) -> bool:
    if len(piece) == 2:
        return piece in _NAMED.values()
    kind, digits = piece[1], piece[2:]
    width = {"x": 2, "u": 4, "U": 8}.get(kind)
    return width == len(digits) and all(c in "0123456789abcdef" for c in digits)


def clean_argv(argv: Iterable[object] | None, limit: int | None = None) -> str:
    """A command line as one safe line: shell-quoted, so arguments with spaces stay
    apart, then cleaned (a newline inside an argument shows as ``\\n``)."""
    if not argv:
        return ""
    return clean(shlex.join(str(a) for a in argv), limit)


def clean_lines(lines: Iterable[str], limit: int | None = None) -> str:
    """Text made of lines we wrote (a report): each line cleaned on its own, so a newline
    hidden in a field cannot start a forged line."""
    return "\n".join(clean(line, limit) for line in lines)


__all__ = ["ELLIPSIS", "clean", "clean_argv", "clean_lines"]
