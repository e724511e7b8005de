#!/bin/sh
# Mutation check of the vendor parsers and the advisor, on demand (docs/testing.md).
#
#   pip install -e '.[mutation]'
#   scripts/mutation_check.sh                          # everything [tool.mutmut] names
#   scripts/mutation_check.sh 'sattui.vendors.ascend*' # one module (mutmut's mutant globs)
#
# Slow (hours for all of sattui/vendors and sattui/advisor on 2 cores; each mutant reruns
# the unit tests that reach it), so it is not part of `pytest` or CI. mutmut keeps its
# results in mutants/ and reruns only what changed since. Surviving mutants are listed
# at the end; `mutmut show NAME` prints one as a diff.
set -eu
cd "$(dirname "$0")/.."
if ! python -c "import mutmut" 2>/dev/null; then
    echo "mutation_check: mutmut is not installed: pip install -e '.[mutation]'" >&2
    exit 2
fi
python -m mutmut run --max-children "${MUTMUT_CHILDREN:-2}" "$@"
python -m mutmut results
