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
