"""Tests written to kill mutants that survived the mutation check of the time ledger and
its rules (scripts/mutation_check.sh; survivors and the equivalent ones are listed in
docs/mutation-survivors.md).

Each test names the mutant it kills. Where a fixture recording reaches the code, it is
used; the rest are contract tests on built contexts, marked so.
"""

from __future__ import annotations
