"""`make test` runs the suite in three parts (scripts/run_tests.sh): the tests not marked
e2e in parallel, the e2e ones marked beside in parallel, then the other e2e ones alone,
each part given the user's PYTEST_ARGS.

The script is run for real with a fake ``python`` that logs its arguments and exits as
told, one exit status per call; the selection itself (tests/conftest.py's ``--e2e``) is
checked with the real pytest collecting a file that holds both kinds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "run_tests.sh"


def _run(tmp_path: Path, codes: list[int], *args: str) -> tuple[int, list[list[str]]]:
    """The script's exit status and each call of the fake python's arguments (one a line,
    NUL-separated words), the fake exiting with ``codes`` in turn."""
    log, state = tmp_path / "calls", tmp_path / "n"
    fake = tmp_path / "python"
    fake.write_text(f"""#!/bin/sh
printf '%s\\0' "$@" >> {log}
echo >> {log}
n=$(cat {state} 2>/dev/null || echo 0)
echo $((n + 1)) > {state}
set -- {' '.join(str(c) for c in codes)}
shift "$n"
exit "$1"
""")
    fake.chmod(0o755)
    p = subprocess.run(["sh", str(SCRIPT), str(fake), "2", "3", *args], capture_output=True, text=True, timeout=30)
    calls = [ln.rstrip("\0").split("\0") for ln in log.read_text().splitlines()] if log.exists() else []
    return p.returncode, calls


def test_every_part_gets_the_users_arguments(tmp_path):
    rc, calls = _run(tmp_path, [0, 0, 0], "-x", "tests/unit", "-k", "a and not b")
    assert rc == 0
    user = ["-x", "tests/unit", "-k", "a and not b"]
    assert calls == [["-m", "pytest", "-q", "-n", "2", "--e2e=no", *user],
                     ["-m", "pytest", "-q", "-n", "3", "--maxschedchunk=1", "--e2e=beside", *user],
                     ["-m", "pytest", "-q", "--e2e=alone", *user]]


@pytest.mark.parametrize("codes, want", [
    ([0, 5, 5], 0),  # only unit tests selected (tests/unit): the e2e parts find none, fine
    ([5, 5, 0], 0),  # only e2e tests that run alone selected
    ([5, 0, 5], 0),
    ([5, 5, 5], 5),  # nothing at all selected: said, as pytest says it
    ([1, 0, 0], 1),  # a failure in the first part fails the run; the others still ran
    ([0, 1, 0], 1),
    ([0, 0, 1], 1),
    ([1, 5, 5], 1),
])
def test_exit_status_is_the_first_failure_and_an_empty_part_is_no_failure(tmp_path, codes, want):
    rc, calls = _run(tmp_path, codes)
    assert rc == want
    assert len(calls) == 3


@pytest.mark.parametrize("stop", ["-x", "--exitfirst", "--maxfail=3"])
@pytest.mark.parametrize("codes, parts", [([1, 0, 0], 1), ([0, 1, 0], 2)])
def test_stop_at_first_failure_starts_no_later_part(tmp_path, stop, codes, parts):
    rc, calls = _run(tmp_path, codes, stop)
    assert rc == 1 and len(calls) == parts


@pytest.mark.parametrize("code", [2, 3, 4])
@pytest.mark.parametrize("first", [0, 1])
def test_an_interrupted_or_broken_part_stops_the_run(tmp_path, code, first):
    rc, calls = _run(tmp_path, [code, 0, 0] if first == 0 else [0, code, 0])
    assert rc == code and len(calls) == first + 1


def _collected(option: str) -> set[str]:
    return set(_collected_in_order(option))


def _collected_in_order(option: str) -> list[str]:
    # test_record_faults.py holds CLI checks and real trainers (mark e2e, all beside);
    # test_launchers_live.py real trainers only, some beside and some alone
    p = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", option,
                        "tests/e2e/test_record_faults.py", "tests/e2e/test_launchers_live.py"],
                       cwd=REPO, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    return [ln.split("::")[1].split("[")[0] for ln in p.stdout.splitlines() if "::" in ln]


E2E_IN_FAULTS = {"test_trainer_exits_mid_recording", "test_signal_stops_recording_leaving_a_readable_file"}
BESIDE_IN_LAUNCHERS = {"test_a_trainer_started_later_by_a_shell_script_is_found_and_sampled",
                       "test_accelerate_launch_single_process"}
ALONE_IN_LAUNCHERS = {"test_pid_of_a_running_wrapper_finds_the_trainer_below_it",
                      "test_a_shell_that_execs_the_trainer_is_sampled_as_the_trainer",
                      "test_every_rank_of_torch_distributed_run_below_a_shell_is_found"}


def _collected_all(*args: str) -> set[str]:
    p = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args,
                        "tests"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert p.returncode in (0, 5), p.stdout + p.stderr  # 5: nothing selected
    return {ln for ln in p.stdout.splitlines() if "::" in ln}


def test_the_e2e_option_splits_a_selection_by_the_marks():
    everything = _collected("--e2e=all")
    only, no = _collected("--e2e=only"), _collected("--e2e=no")
    beside, alone = _collected("--e2e=beside"), _collected("--e2e=alone")
    assert only == E2E_IN_FAULTS | BESIDE_IN_LAUNCHERS | ALONE_IN_LAUNCHERS
    assert "test_no_such_pid" in no
    assert only | no == everything and not only & no
    assert beside | alone == only and not beside & alone
    assert beside == E2E_IN_FAULTS | BESIDE_IN_LAUNCHERS


def test_the_beside_part_starts_its_long_tests_first():
    # the two long launcher tests (marked long) before the record-fault ones, which
    # come first in collection order
    order = _collected_in_order("--e2e=beside")
    assert set(order[:2]) == BESIDE_IN_LAUNCHERS, order
    assert set(order[2:]) == E2E_IN_FAULTS, order


def test_the_beside_mark_is_only_on_e2e_tests():
    # `beside` without `e2e` would run with the unit tests and never in the e2e parts
    beside = _collected_all("-m", "beside and not e2e")
    assert beside == set()
    # `long` orders the beside part only: elsewhere it would mean nothing
    assert _collected_all("-m", "long and not beside") == set()
