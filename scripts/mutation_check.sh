#!/bin/sh
# Mutation check of the vendor parsers and the advisor's ledger and rule modules, on
# demand (docs/testing.md; survivors read so far: docs/mutation-survivors.md).
#
#   pip install -e '.[mutation]'
#   scripts/mutation_check.sh                               # everything [tool.mutmut] names
#   scripts/mutation_check.sh 'sattui.vendors.box_table*'   # one module (mutmut's mutant-name globs)
#   scripts/mutation_check.sh 'sattui.vendors.values*' 'sattui.ledger.bins*'   # a subset
#   MUTMUT_CHILDREN=1 scripts/mutation_check.sh ...         # parallel test runs (default 2)
#
# What is mutated and which unit-test files run: [tool.mutmut] in pyproject.toml. Each
# mutant reruns only the selected tests that reached its function. Slow (hours for all
# of it on 2 cores), so it is not part of `pytest` or CI; it runs under `nice -n 19`.
# mutmut keeps its results in mutants/ (git-ignored) and reruns only what changed since.
# `mutmut results` at the end lists the survivors (of the whole cache, not only of the
# globs given); `python -m mutmut show NAME` prints one as a diff.
set -eu
cd "$(dirname "$0")/.."
PY="${PYTHON:-python}"
if [ -x .venv/bin/python ] && [ -z "${PYTHON:-}" ]; then PY=.venv/bin/python; fi
if ! "$PY" -c "import mutmut" 2>/dev/null; then
    echo "mutation_check: mutmut is not installed: pip install -e '.[mutation]'" >&2
    exit 2
fi
nice -n 19 "$PY" -m mutmut run --max-children "${MUTMUT_CHILDREN:-2}" "$@"
nice -n 19 "$PY" -m mutmut results
