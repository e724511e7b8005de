"""Suite-wide options.

``--e2e=only|no`` splits a selection in two (``make test``, scripts/run_tests.sh): the
end-to-end tests (mark ``e2e``: real trainers, real py-spy, timings that a busy box
skews) run alone, one at a time; the rest, CPU bound, run in parallel under
pytest-xdist. An option of its own rather than ``-m``: pytest keeps only the last
``-m``, and the user's own ``-m``/``-k``/paths must still apply to both halves.
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--e2e", choices=("all", "only", "no"), default="all",
                     help="run every selected test (all, the default), only those marked e2e, or none of them")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    which = config.getoption("--e2e")
    if which == "all":
        return
    want = which == "only"
    keep = [i for i in items if (i.get_closest_marker("e2e") is not None) == want]
    gone = [i for i in items if (i.get_closest_marker("e2e") is not None) != want]
    if gone:
        config.hook.pytest_deselected(items=gone)
        items[:] = keep
