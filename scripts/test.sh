#!/usr/bin/env bash
# README test command: set up (idempotent), build, and run the whole ctest suite.
#   scripts/test.sh [extra ctest args, e.g. -L unit]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh"
build=${CK_BUILD:-$root/build}
ctest --test-dir "$build" --output-on-failure --timeout 1800 "$@"
