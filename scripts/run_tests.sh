#!/bin/sh
# `make test`: the suite in three parts, each given the user's own pytest arguments.
#
#   scripts/run_tests.sh PYTHON JOBS BESIDE_JOBS [PYTEST ARGS...]
#
# 1. every selected test not marked e2e, in parallel (pytest-xdist, `-n JOBS`): they are
#    CPU bound, and a 2-core box runs them in about half the time;
# 2. the selected e2e tests marked `beside`, in parallel too (`-n BESIDE_JOBS`): real
#    processes, but nothing judged that a neighbour's load would skew (faults, file
#    safety, process trees, containers); most of their time is spent waiting on those
#    processes, so more of them than cores keep the box busy;
# 3. then the other selected e2e tests, one at a time with the box to themselves: they
#    run real trainers and real py-spy and compare shares, timings and CPU figures that a
#    busy box skews.
#
# The user's arguments (`make test PYTEST_ARGS="-x tests/unit"`) go to every part, so
# they select and behave as they say (tests/conftest.py's --e2e option splits the
# selection; `-m` would replace theirs). A part that selects nothing exits 5; that is
# fine as long as another part ran something. With -x/--exitfirst/--maxfail no part
# starts after a failure. Exit status: the first failure's.
set -u

py=$1
jobs=$2
beside_jobs=$3
shift 3

stop_early=no
for a in "$@"; do
    case "$a" in
        -x | --exitfirst | --maxfail | --maxfail=*) stop_early=yes ;;
    esac
done

status=0   # the first failure's exit status
ran=no     # whether any part selected a test
for part in no beside alone; do
    case "$part" in
        no) "$py" -m pytest -q -n "$jobs" --e2e=no "$@" ;;
        beside) "$py" -m pytest -q -n "$beside_jobs" --maxschedchunk=1 --e2e=beside "$@" ;;
        alone) "$py" -m pytest -q --e2e=alone "$@" ;;
    esac
    code=$?
    # 0 passed, 5 nothing selected; 1 failed (go on unless told to stop); 2-4 interrupted,
    # internal or usage error: the next part would say the same or should not start.
    case "$code" in
        0) ran=yes ;;
        5) ;;
        1) ran=yes
           [ "$status" = 0 ] && status=1
           [ "$stop_early" = yes ] && exit 1 ;;
        *) exit "$code" ;;
    esac
done

if [ "$ran" = no ]; then
    exit 5  # the selection matched no test at all: say so, as pytest does
fi
exit "$status"
