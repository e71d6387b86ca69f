#!/usr/bin/env bash
# README test command: set up (idempotent), build, run the whole ctest suite, then a fuzz
# smoke run of every parser (scripts/fuzz.sh, CK_FUZZ_SECONDS each, default 15).
#   scripts/test.sh [extra ctest args, e.g. -L unit]
#   scripts/test.sh --sanitize   the full sanitizer job: an ASan + UBSan build (build-asan/)
#                                running the unit, model and pipeline tests, then 60 s of
#                                fuzzing per target (about 15 minutes on 2 cores)
#   scripts/test.sh --tsan       a ThreadSanitizer build (build-tsan/) running the threaded
#                                tests: the clip pipeline, serve, the log handler and the
#                                embedding cases (tests/tsan.supp: uninstrumented libraries only)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=${CK_VENV:-$HOME/.cache/corridorkey-engine/venv-torch2.15.0}

# sanitized_build DIR CMAKE_OPTION: set up (no main build), configure and build DIR.
sanitized_build() {
  CK_SKIP_BUILD=1 "$root/scripts/setup.sh"
  local gen=()
  [ -f "$1/CMakeCache.txt" ] || gen=(-G Ninja)
  cmake -S "$root" -B "$1" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo "-D$2=ON" \
        -DCK_WITH_CUDA=OFF -DCK_PYTHON="$venv/bin/python"
  cmake --build "$1" --parallel "${CK_JOBS:-$(nproc)}"
}

if [ "${1:-}" = "--sanitize" ]; then
  shift
  asan=${CK_ASAN_BUILD:-$root/build-asan}
  sanitized_build "$asan" CK_SANITIZE
  # LibTorch keeps allocations alive until exit: leak reports would be noise.
  ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir "$asan" --output-on-failure --timeout 1800 -L "unit|model|pipeline" "$@"
  exec "$root/scripts/fuzz.sh" 60
fi

if [ "${1:-}" = "--tsan" ]; then
  shift
  tsan=${CK_TSAN_BUILD:-$root/build-tsan}
  sanitized_build "$tsan" CK_TSAN
  # halt_on_error: a report fails the test that caused it; second_deadlock_stack for locks.
  TSAN_OPTIONS="suppressions=$root/tests/tsan.supp halt_on_error=1 second_deadlock_stack=1 exitcode=66" \
    ctest --test-dir "$tsan" --output-on-failure --timeout 3600 -R "${CK_TSAN_TESTS:-^(pipeline|unit|model.embedding|cli.serve|cli.inference_clip)$}" "$@"
  exit $?
fi

"$root/scripts/setup.sh"
build=${CK_BUILD:-$root/build}
ctest --test-dir "$build" --output-on-failure --timeout 1800 "$@"
"$root/scripts/fuzz.sh" "${CK_FUZZ_SECONDS:-15}"
