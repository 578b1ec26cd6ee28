#!/usr/bin/env bash
# Run the array API standard's conformance suite (data-apis/array-api-tests)
# against tests/array_api/pyreduce_namespace.py: NumPy's array API namespace
# whose statistical, searching and utility reductions are pyreduce's. It runs
# the suite's statistical, searching and utility function tests, and its two
# special-case tests of the statistical functions (empty arrays, NaN).
#
#   tests/array_api/run.sh /path/to/array-api-tests [extra pytest arguments]
#
# The suite is not on PyPI and is not vendored here: pass a checkout of it
# (with its array-api submodule: `git submodule update --init`) as the first
# argument or as ARRAY_API_TESTS_DIR. It needs `pip install hypothesis ndindex
# pytest-json-report` besides pyreduce's test extra.
#
# Environment:
#   PYREDUCE_ARRAY_API_BACKEND  cpu (default), sim or cuda: where pyreduce runs
#   ARRAY_API_TESTS_VERSION     the standard's version tested (default: NumPy's,
#                               2024.12 for NumPy 2.x)
#   MAX_EXAMPLES                Hypothesis examples per test (default 200; the
#                               suite runs a tenth of that for its
#                               "unvectorized" tests)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
suite="${1:-${ARRAY_API_TESTS_DIR:-}}"
[ $# -gt 0 ] && shift
if [ -z "$suite" ] || [ ! -d "$suite/array_api_tests" ]; then
    echo "usage: $0 /path/to/array-api-tests [pytest arguments]" >&2
    echo "  (or set ARRAY_API_TESTS_DIR to a checkout of data-apis/array-api-tests)" >&2
    exit 2
fi
if [ ! -d "$suite/array-api/spec" ]; then
    echo "$suite/array-api is empty: run 'git submodule update --init' there" >&2
    exit 2
fi

export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"
export ARRAY_API_TESTS_MODULE=pyreduce_namespace
export PYREDUCE_ARRAY_API_BACKEND="${PYREDUCE_ARRAY_API_BACKEND:-cpu}"
if [ "$PYREDUCE_ARRAY_API_BACKEND" = sim ]; then
    export NUMBA_ENABLE_CUDASIM=1
fi

cd "$suite"
# -p no:cacheprovider: write nothing into the suite's checkout but Hypothesis'
# example database (.hypothesis), which the suite keeps there
# --disable-deadline: the first call of each dtype, shape and keyword
# combination compiles a kernel (seconds), past Hypothesis' 800 ms deadline.
# The options take their values with "=": pytest reads its own arguments before
# the suite's conftest.py defines these options, and a separate value would be
# taken for a path to test, moving pytest's rootdir.
exec python -m pytest -p no:cacheprovider -rfE --disable-deadline \
    --max-examples="${MAX_EXAMPLES:-200}" \
    --skips-file="$here/skips.txt" \
    array_api_tests/test_statistical_functions.py \
    array_api_tests/test_searching_functions.py \
    array_api_tests/test_utility_functions.py \
    array_api_tests/test_special_cases.py::test_empty_arrays \
    array_api_tests/test_special_cases.py::test_nan_propagation \
    "$@"
