"""Suite-wide options.

``--e2e=no|beside|alone`` splits a selection in three (``make test``,
scripts/run_tests.sh): the tests not marked ``e2e``, CPU bound, run in parallel under
pytest-xdist; the end-to-end tests marked ``beside`` too (real processes, but no figure
that another test's load would skew: fake vendor tools, faults, file safety, process
trees); the other end-to-end tests (real trainers whose shares, timings and CPU figures
are judged) alone, one at a time. ``--e2e=only`` is every end-to-end test. An option of
its own rather than ``-m``: pytest keeps only the last ``-m``, and the user's own
``-m``/``-k``/paths must still apply to every part.
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--e2e", choices=("all", "only", "no", "beside", "alone"), default="all",
                     help="run every selected test (all, the default), only those marked e2e, none of them, "
                          "only the e2e ones marked beside (safe to run in parallel), or only the other e2e ones")


def _part(item: pytest.Item) -> str:
    if item.get_closest_marker("e2e") is None:
        return "no"
    return "beside" if item.get_closest_marker("beside") is not None else "alone"


WANT = {"only": {"beside", "alone"}, "no": {"no"}, "beside": {"beside"}, "alone": {"alone"}}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    which = config.getoption("--e2e")
    if which == "all":
        return
    want = WANT[which]
    keep = [i for i in items if _part(i) in want]
    gone = [i for i in items if _part(i) not in want]
    if gone:
        config.hook.pytest_deselected(items=gone)
        items[:] = keep
    if which == "beside":
        # Longest first, each worker taking one test at a time (run_tests.sh passes
        # --maxschedchunk=1): a 45-s Lightning job started last kept the others waiting on it.
        items.sort(key=lambda i: i.get_closest_marker("long") is None)
