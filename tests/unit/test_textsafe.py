"""The sanitizer for untrusted text (sattui/textsafe.py): properties over arbitrary
strings, and the forms a reader sees for the characters that matter."""

from __future__ import annotations

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from sattui.textsafe import ELLIPSIS, clean, clean_argv, clean_lines

# What must never reach a terminal, as Unicode's own classes (the regex package's data,
# the source sattui/textsafe.py reads): controls (C0, C1, DEL), format characters (bidi
# overrides, zero-width), lone surrogates, line and paragraph separators, private use,
# unassigned code points, and every Default_Ignorable_Code_Point. Spelled out one class
# at a time here, whatever shorthand the module uses.
HIDDEN_CLASSES = ["Cc", "Cf", "Cs", "Zl", "Zp", "Co", "Cn", "Default_Ignorable_Code_Point"]
HIDDEN_SET = "".join(rf"\p{{{c}}}" for c in HIDDEN_CLASSES)
HIDDEN, VISIBLE = regex.compile(f"[{HIDDEN_SET}]"), regex.compile(f"[^{HIDDEN_SET}]")
ALL_CODE_POINTS = "".join(map(chr, range(0x110000)))  # surrogates included


def _runs(pattern: str, flags: int = 0) -> list[tuple[int, int]]:
    """The code points ``pattern`` matches, as runs (first, last)."""
    return [(m.start(), m.end() - 1) for m in regex.finditer(pattern + "+", ALL_CODE_POINTS, flags=flags)]


# Each class's code points, scanned once from the same data. The categories are disjoint;
# Default_Ignorable_Code_Point is drawn where it adds to them (Hangul and halfwidth
# fillers, Khmer inherent vowels, variation selectors, the combining grapheme joiner),
# so that leaving any one class out of the rule leaves characters of it raw.
CLASS_RUNS = {c: _runs(rf"\p{{{c}}}") for c in HIDDEN_CLASSES[:-1]}
CLASS_RUNS["Default_Ignorable_Code_Point"] = _runs(
    r"[\p{Default_Ignorable_Code_Point}--[" + "".join(rf"\p{{{c}}}" for c in HIDDEN_CLASSES[:-1]) + "]]", regex.V1)
# Drawn run first, then a code point in it: the small runs (one filler) are as likely as
# the planes of private use.
CLASS_CHARS = {c: st.tuples(st.sampled_from(runs), st.integers(0, 0x10FFFF)).map(
    lambda t: chr(t[0][0] + t[1] % (t[0][1] - t[0][0] + 1))) for c, runs in CLASS_RUNS.items()}
# Rare in a uniform draw, so mixed in on purpose: ESC and CSI, newline, tab, CR, NUL, DEL,
# bidi override and isolate, zero-width space and joiner, BOM, line separator, a
# surrogateescape'd byte, a tag character, and invisible letters / variation selector.
NASTY = ["\x1b", "\x9b", "\x07", "\n", "\t", "\r", "\x00", "\x7f", "\u202e", "\u2066", "\u200b", "\u200d",
         "\ufeff", "\u2028", "\u2029", "\udc80", "\U000e0041", "\u3164", "\u115f", "\ufe0f", "\u034f", "\\", "x",
         "1", "b"]
any_text = st.text(st.one_of(st.characters(exclude_categories=()), st.sampled_from(NASTY), *CLASS_CHARS.values()),
                   max_size=60)
# Visible text: letters, marks, numbers, punctuation, symbols and spaces, less the hidden
# classes (the Default_Ignorable letters and marks; hypothesis's categories come from
# unicodedata, the rule's from regex).
visible_text = st.text(st.characters(categories=["L", "M", "N", "P", "S", "Zs"]).filter(
    lambda c: not HIDDEN.match(c)), max_size=60)
SETTINGS = settings(max_examples=400, deadline=None)


def _forbidden_in(s: str) -> list[str]:
    return HIDDEN.findall(s)


@SETTINGS
@given(any_text, st.none() | st.integers(1, 80))
def test_output_never_holds_a_control_character(s, limit):
    out = clean(s, limit)
    assert _forbidden_in(out) == []
    out.encode("utf-8")  # no lone surrogate left: it can be written to any UTF-8 terminal


@SETTINGS
@given(any_text, st.none() | st.integers(1, 80))
def test_idempotent(s, limit):
    once = clean(s, limit)
    assert clean(once, limit) == once
    assert clean(once) == once


@SETTINGS
@given(visible_text)
def test_printable_text_is_unchanged(s):
    assert clean(s) == s


@pytest.mark.parametrize("cls", HIDDEN_CLASSES)
@settings(max_examples=100, deadline=None)
@given(st.data())
def test_every_character_of_each_hidden_class_is_escaped(cls, data):
    # Text that holds at least one character of the class, amid visible text (any visible
    # text is any_text's part above; a few kinds here, to keep 8 classes quick).
    hidden = data.draw(st.lists(CLASS_CHARS[cls], min_size=1, max_size=8))
    around = data.draw(st.lists(st.text(st.sampled_from("ab 1\\训é▁"), max_size=4), min_size=len(hidden) + 1,
                                max_size=len(hidden) + 1))
    s = around[0] + "".join(h + v for h, v in zip(hidden, around[1:]))
    out = clean(s)
    assert _forbidden_in(out) == []
    for h in hidden:
        assert h not in out


def test_the_hangul_and_khmer_fillers_are_escaped():
    # Default_Ignorable letters and marks (Lo, Mn) drawn as nothing: the hand-kept list
    # this module once had could lose them and no test noticed.
    assert clean("a\u1160b") == "a\\u1160b"  # HANGUL JUNGSEONG FILLER
    assert clean("a\u17b4b") == "a\\u17b4b"  # KHMER VOWEL INHERENT AQ
    assert clean("a\u17b5b") == "a\\u17b5b"  # KHMER VOWEL INHERENT AA
    assert clean("a\uffa0b") == "a\\uffa0b"  # HALFWIDTH HANGUL FILLER
    assert clean("\u1160\u17b4\u17b5\uffa0") == "\\u1160\\u17b4\\u17b5\\uffa0"


def test_private_use_and_unassigned_code_points_are_escaped_but_other_spaces_kept():
    assert clean("\ue000\U000f0000\U0010fffd") == "\\ue000\\U000f0000\\U0010fffd"  # Co
    assert clean("\u0378\ufdd0\uffff\U0010ffff") == "\\u0378\\ufdd0\\uffff\\U0010ffff"  # Cn
    assert clean("a\u00a0b\u3000c\u2009d") == "a\u00a0b\u3000c\u2009d"  # Zs: visible


def test_the_decision_is_the_regex_data_even_where_unicodedata_differs():
    # str.isprintable follows the interpreter's unicodedata, maybe another Unicode version
    # than regex's: where the two disagree, clean() follows the rule (regex), both ways.
    for c in ALL_CODE_POINTS[:0x80]:
        assert (clean(c) == c) == c.isprintable()  # the ASCII fast path is the rule
    printable = "".join(c for c in ALL_CODE_POINTS if c.isprintable())
    unprintable = "".join(c for c in ALL_CODE_POINTS if not c.isprintable())
    kept, escaped = VISIBLE.findall(unprintable), HIDDEN.findall(printable)
    assert "\u00a0" in kept and "\u1160" in escaped  # a space; a filler printable as a letter
    assert [c for c in kept if clean(c) != c] == []
    assert [c for c in escaped if clean(c) == c] == []


def test_the_fourth_mongolian_free_variation_selector_is_escaped():
    # U+180F (Unicode 14, a mark that draws nothing) is Default_Ignorable like U+180B-180D;
    # the strategy above once drew it as "visible" (its excluded range stopped at 180D).
    assert clean("a\u180fb") == "a\\u180fb"


@SETTINGS
@given(any_text, st.integers(1, 40))
def test_cut_to_the_limit_with_an_ellipsis_never_inside_an_escape(s, limit):
    full = clean(s)
    out = clean(s, limit)
    assert len(out) <= limit
    if len(full) <= limit:
        assert out == full
    else:
        assert out.endswith(ELLIPSIS)
        kept = out[: -len(ELLIPSIS)]
        assert full.startswith(kept)
        # The cut falls between two characters' forms, never inside one ("\x1" never shows).
        bounds, n = {0}, 0
        for c in s:
            n += len(clean(c))
            bounds.add(n)
        assert len(kept) in bounds


def test_escape_sequences_show_as_inert_text():
    assert clean("\x1b]0;PWNED\x07") == "\\x1b]0;PWNED\\x07"
    assert clean("\x1b[31mred\x1b[0m") == "\\x1b[31mred\\x1b[0m"
    assert clean("\x9b2J") == "\\x9b2J"  # C1 CSI
    assert clean("a\nb\tc\rd") == "a\\nb\\tc\\rd"


def test_trojan_source_bidi_and_zero_width_characters_are_shown():
    assert clean("admin\u202e\u2066txt.exe\u2069") == "admin\\u202e\\u2066txt.exe\\u2069"
    assert clean("py\u200btorch\ufeff") == "py\\u200btorch\\ufeff"
    assert clean("\u3164") == "\\u3164"  # a Hangul filler: a letter drawn as nothing


def test_undecodable_bytes_show_as_the_byte():
    raw = b"train\xff.py"
    assert clean(raw.decode("utf-8", "surrogateescape")) == "train\\xff.py"


def test_non_latin_text_and_backslashes_are_kept():
    assert clean("训练 données ▁▂▃ C:\\data\\x") == "训练 données ▁▂▃ C:\\data\\x"


def test_command_line_is_one_line_with_its_arguments_apart():
    argv = ["python", "-c", "import os\nprint(1)", "\x1b]0;PWNED\x07", "two words"]
    out = clean_argv(argv)
    assert "\n" not in out and "\x1b" not in out
    assert out == "python -c 'import os\\nprint(1)' '\\x1b]0;PWNED\\x07' 'two words'"
    assert clean_argv(None) == "" and clean_argv([]) == ""
    assert len(clean_argv(["x" * 100], 20)) == 20


def test_lines_are_cleaned_one_by_one_so_no_line_can_be_forged():
    out = clean_lines(["trainer     pid 1: evil\nverdict     HIGH healthy", "next"])
    assert out.splitlines() == ["trainer     pid 1: evil\\nverdict     HIGH healthy", "next"]


def test_sattuis_own_characters_are_visible_by_the_rule():
    # clean() lets a line of printable ASCII and these through without asking the rule:
    # each must be one the rule keeps, or a hidden character would pass unescaped.
    from sattui.textsafe import _OWN_VISIBLE

    assert _OWN_VISIBLE and not HIDDEN.search(_OWN_VISIBLE)
    mixed = "a – b █ η\u202e"  # own characters beside a hidden one: still escaped
    assert clean(mixed) == "a – b █ η\\u202e"


def test_report_json_does_not_import_regex():
    # Importing regex is a share of ``sattui report``'s CPU worth having (issue 25):
    # only text outside printable ASCII and sattui's own characters needs it.
    import subprocess
    import sys

    code = ("import sys\nfrom sattui.cli import main\nimport sattui.report\nfrom sattui.textsafe import clean\n"
            "clean('rank 0 – 12.5 % █ η ± 0.1')\nprint('regex' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
