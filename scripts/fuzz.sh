#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, clang + ASan + UBSan) in build-fuzz/ and runs
# each for SECONDS (default 60) from generated seed corpora. Exit 1 on any finding; the
# crashing input is kept in build-fuzz/findings/.
#   scripts/fuzz.sh [SECONDS] [TARGET...]     targets: image yaml config_json checkpoint safetensors
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(image yaml config_json checkpoint safetensors)
venv=${CK_VENV:-$HOME/.cache/corridorkey-engine/venv-torch2.15.0}
build=${CK_FUZZ_BUILD:-$root/build-fuzz}
log() { printf '[fuzz] %s\n' "$*" >&2; }

gen=()
[ -f "$build/CMakeCache.txt" ] || gen=(-G Ninja)
CC=clang CXX=clang++ cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCK_FUZZ=ON -DCK_WERROR="${CK_WERROR:-OFF}" -DCK_PYTHON="$venv/bin/python" > "$build.configure.log" 2>&1 \
  || { cat "$build.configure.log"; exit 1; }
cmake --build "$build" --parallel "${CK_JOBS:-$(nproc)}" --target $(printf 'fuzz_%s ' "${targets[@]}")
"$venv/bin/python" "$root/tests/fuzz/make_seeds.py" "$build/seeds" >&2

mkdir -p "$build/findings"
status=0
for t in "${targets[@]}"; do
  corpus="$build/corpus/$t"
  mkdir -p "$corpus"
  # Past findings (tests/fuzz/regressions/<target>/) are replayed first, every run.
  regressions=()
  [ -d "$root/tests/fuzz/regressions/$t" ] && regressions=("$root/tests/fuzz/regressions/$t")
  log "fuzz_$t for ${seconds}s"
  # LibTorch keeps allocations alive to the end of the process: leak reports are noise here.
  if ! ASAN_OPTIONS=detect_leaks=0 \
       "$build/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=3072 \
       -max_len=65536 -artifact_prefix="$build/findings/${t}-" -print_final_stats=1 \
       "$corpus" "$build/seeds/$t" "${regressions[@]}" > "$build/fuzz_$t.log" 2>&1; then
    tail -40 "$build/fuzz_$t.log"
    log "fuzz_$t: FINDING (input kept in $build/findings/)"
    status=1
  else
    log "fuzz_$t: ok, $(grep -o 'stat::number_of_executed_units: *[0-9]*' "$build/fuzz_$t.log" | grep -o '[0-9]*$') runs"
  fi
done
exit $status
