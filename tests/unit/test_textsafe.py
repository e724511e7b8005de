"""The sanitizer for untrusted text (sattui/textsafe.py): properties over arbitrary
strings, and the forms a reader sees for the characters that matter."""

from __future__ import annotations

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from sattui.textsafe import ELLIPSIS, clean, clean_argv, clean_lines

# What must never reach a terminal: controls (C0, C1, DEL), format characters (bidi
# overrides, zero-width), lone surrogates, line and paragraph separators.
FORBIDDEN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
# Rare in a uniform draw, so mixed in on purpose: ESC and CSI, newline, tab, CR, NUL, DEL,
# bidi override and isolate, zero-width space and joiner, BOM, line separator, a
# surrogateescape'd byte, a tag character, and invisible letters / variation selector.
NASTY = ["\x1b", "\x9b", "\x07", "\n", "\t", "\r", "\x00", "\x7f", "\u202e", "\u2066", "\u200b", "\u200d",
         "\ufeff", "\u2028", "\u2029", "\udc80", "\U000e0041", "\u3164", "\u115f", "\ufe0f", "\u034f", "\\", "x",
         "1", "b"]
INVISIBLE_LETTERS = {"\u3164", "\u115f", "\ufe0f", "\u034f"}
any_text = st.text(st.one_of(st.characters(exclude_categories=()), st.sampled_from(NASTY)), max_size=60)
# Unicode's Default_Ignorable_Code_Point letters and marks (DerivedCoreProperties.txt):
# drawn as nothing, so escaped too, though their category says "letter" or "mark".
IGNORABLE_LETTERS_AND_MARKS = [(0x034F, 0x034F), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180F),
                               (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFFA0, 0xFFA0), (0xE0100, 0xE01EF)]
# Visible text: letters, marks, numbers, punctuation, symbols and spaces, less those.
visible_text = st.text(st.characters(categories=["L", "M", "N", "P", "S", "Zs"]).filter(
    lambda c: not any(lo <= ord(c) <= hi for lo, hi in IGNORABLE_LETTERS_AND_MARKS)), max_size=60)
SETTINGS = settings(max_examples=400, deadline=None)


def _forbidden_in(s: str) -> list[str]:
    return [c for c in s if unicodedata.category(c) in FORBIDDEN or c in INVISIBLE_LETTERS]


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
