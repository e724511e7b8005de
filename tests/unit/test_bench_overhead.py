"""The statistics of bench/overhead.py (the bench itself prints figures; nothing here is timed)."""

import importlib.util
import statistics
from pathlib import Path

spec = importlib.util.spec_from_file_location("overhead", Path(__file__).resolve().parents[2] / "bench" / "overhead.py")
overhead = importlib.util.module_from_spec(spec)
spec.loader.exec_module(overhead)


def test_steps_per_s_is_steps_between_the_first_and_last_step_inside_the_window():
    times = [0.0, 0.1, 0.2, 0.35, 0.5, 0.6, 1.0]
    # steps ending at 0.2, 0.35, 0.5 are inside [0.15, 0.55): 2 intervals over 0.3 s
    assert overhead.steps_per_s(times, 0.15, 0.55) == 2 / 0.3
    assert overhead.steps_per_s(times, 0.15, 0.3) is None  # too few steps to say


def test_bootstrap_ci_brackets_the_median():
    xs = [0.97, 1.01, 0.99, 1.02, 0.98, 1.00, 0.96, 1.03]
    lo, hi = overhead.bootstrap_median_ci(xs, n=2000)
    assert min(xs) <= lo <= statistics.median(xs) <= hi <= max(xs) and lo < hi
    assert overhead.bootstrap_median_ci([1.0] * 5, n=200) == (1.0, 1.0)


def test_median_step_rate_is_one_over_the_median_step_inside_the_window():
    times = [0.0, 0.1, 0.2, 0.3, 1.3, 1.4, 1.5]  # one slow step of 1.0 s among 0.1-s steps
    assert abs(overhead.median_step_rate(times, 0.0, 2.0) - 10.0) < 1e-9
    assert overhead.steps_per_s(times, 0.0, 2.0) < 5  # the mean is pulled down by the slow step
    assert overhead.median_step_rate(times, 0.0, 0.25) is None  # too few steps to say


def test_the_block_bootstrap_widens_for_correlated_cycles_and_brackets_the_mean():
    import random

    rng = random.Random(5)
    iid = [rng.gauss(0.0, 1.0) for _ in range(400)]
    ar, x = [], 0.0
    for e in iid:  # the same noise, each value carrying 0.8 of the one before
        x = 0.8 * x + e
        ar.append(x)
    lo, hi = overhead.block_bootstrap_ci(iid, statistics.fmean, n=1000)
    assert lo < statistics.fmean(iid) < hi
    ilo, ihi = overhead.bootstrap_median_ci(ar, n=1000)
    blo, bhi = overhead.block_bootstrap_ci(ar, statistics.median, n=1000)
    # neighbours that move together are fewer pieces of evidence: an interval that takes
    # them as independent is too narrow; the blocks keep them together
    assert bhi - blo > 1.5 * (ihi - ilo), (blo, bhi, ilo, ihi)


def test_a_frozen_tree_is_stopped_to_its_last_descendant_and_thawed_again():
    import signal
    import subprocess
    import time

    import psutil

    sh = subprocess.Popen(["sh", "-c", "sleep 30 & sleep 30 & wait"])
    try:
        root = psutil.Process(sh.pid)
        end = time.monotonic() + 5
        while len(root.children()) < 2 and time.monotonic() < end:
            time.sleep(0.02)
        tree = [root, *root.children(recursive=True)]
        assert len(tree) == 3
        overhead._signal_tree(root, signal.SIGSTOP)
        time.sleep(0.1)
        assert {p.status() for p in tree} == {psutil.STATUS_STOPPED}
        overhead._signal_tree(root, signal.SIGCONT)
        time.sleep(0.1)
        assert psutil.STATUS_STOPPED not in {p.status() for p in tree}
    finally:
        for p in psutil.Process(sh.pid).children(recursive=True):
            p.kill()
        sh.kill()
        sh.wait()


def test_each_on_phase_is_paired_with_the_off_phases_around_it_and_gaps_are_skipped():
    # OFF 10, ON 9, OFF 8, ON -, OFF 12, ON 11, OFF None
    assert overhead._paired_ratios([10.0, 8.0, 12.0, None], [9.0, None, 11.0]) == [1.0]
