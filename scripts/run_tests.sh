#!/bin/sh
# `make test`: the suite in two halves, each given the user's own pytest arguments.
#
#   scripts/run_tests.sh PYTHON JOBS [PYTEST ARGS...]
#
# 1. every selected test not marked e2e, in parallel (pytest-xdist, `-n JOBS`): they are
#    CPU bound, and a 2-core box runs them in about half the time;
# 2. then the selected e2e tests, one at a time with the box to themselves: they run real
#    trainers and real py-spy and compare timings that a busy box skews.
#
# The user's arguments (`make test PYTEST_ARGS="-x tests/unit"`) go to both halves, so
# they select and behave as they say (tests/conftest.py's --e2e option splits the
# selection; `-m` would replace theirs). A half that selects nothing exits 5; that is
# fine as long as the other half ran something. With -x/--exitfirst/--maxfail the second
# half does not start after a failure in the first. Exit status: the first failure's.
set -u

py=$1
jobs=$2
shift 2

stop_early=no
for a in "$@"; do
    case "$a" in
        -x | --exitfirst | --maxfail | --maxfail=*) stop_early=yes ;;
    esac
done

"$py" -m pytest -q -n "$jobs" --e2e=no "$@"
first=$?
# 0 passed, 5 nothing selected; 1 failed (go on unless told to stop); 2-4 interrupted,
# internal or usage error: the second half would say the same or should not start.
case "$first" in
    0 | 5) ;;
    1) [ "$stop_early" = yes ] && exit 1 ;;
    *) exit "$first" ;;
esac

"$py" -m pytest -q --e2e=only "$@"
second=$?

if [ "$first" = 5 ] && [ "$second" = 5 ]; then
    exit 5  # the selection matched no test at all: say so, as pytest does
fi
[ "$first" = 5 ] && first=0
[ "$second" = 5 ] && second=0
[ "$first" != 0 ] && exit "$first"
exit "$second"
