#!/bin/sh
# tests/release/launch.sh BUILD_DIR: the trial start paths that only a
# release build takes, run from that build. The sanitizer build (make test's
# ./build-asan) starts trials with clone3 as a fork or with fork(): its
# instrumented code cannot run on the borrowed stack of a child that shares
# the worker's memory until exec (worker/task.c). So make test also builds
# ./build (RelWithDebInfo) and this runs there: the launch unit tests, the
# real cgq-worker against a fake coordinator, and the two integration tests
# that a broken start path would fail first (a trial's grandchildren die with
# a killed worker; a trial ignoring SIGTERM hits its timeout), each in both
# confinement modes. Skips (77) when BUILD_DIR has no such build.
set -u
build=${1:?usage: launch.sh BUILD_DIR}
src=$(cd "$(dirname "$0")/../.." && pwd)
for t in task_test confine_test spare_test worker_test cgq-worker cgq-coordinator cgq; do
    if [ ! -x "$build/bin/$t" ]; then
        echo "release_launch: SKIP: $build/bin/$t is not built (make test builds ./build first)"
        exit 77
    fi
done
if grep -q 'CGQ_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
    echo "release_launch: SKIP: $build is a sanitizer build; this test is for the release one"
    exit 77
fi
fail=0
for t in task_test confine_test spare_test worker_test; do
    # worker_test finds cgq-worker as ./bin/cgq-worker
    if ! (cd "$build" && "./bin/$t" > "$build/release_$t.log" 2>&1); then
        echo "release_launch: $t FAILED; its output:"
        tail -n 60 "$build/release_$t.log"
        fail=1
    else
        echo "release_launch: $t passed"
    fi
done
for t in integration/test_orphans.py faults/test_timeout_fork.py; do
    if ! CGQ_BIN_DIR="$build/bin" PYTHONDONTWRITEBYTECODE=1 python3 "$src/tests/$t" \
            > "$build/release_$(basename "$t" .py).log" 2>&1; then
        echo "release_launch: $t FAILED; its output:"
        tail -n 60 "$build/release_$(basename "$t" .py).log"
        fail=1
    else
        echo "release_launch: $t passed"
    fi
done
exit $fail
