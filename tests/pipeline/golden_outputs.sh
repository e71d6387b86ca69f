#!/bin/bash
# Bit-identity across refactors (issue 37): the sample clip keyed through the real CLI in
# fixed configurations (no timed plan: its choices follow the machine's timings), and bench's
# drift columns on seeded random weights, as sha256 of every output file and the drift values,
# against a record made on the same CPU with the same LibTorch. Without a record for this
# machine the test says so and skips visibly; `--record FILE` writes one.
#   golden_outputs.sh CLI SOURCE_DIR WORKDIR [--record FILE]
set -u
cli=$1; src=$2; work=$3; record=""
[ "${4:-}" = --record ] && record=${5:?--record needs a file}
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work"; mkdir -p "$work"
export CORRIDORKEY_TUNE_CACHE="$work/tune.json"
# The record is keyed on the CPU and the LibTorch version: either changes the digests.
identity=$("$cli" info --json | "${CK_PYTHON:-python3}" -c \
  "import json,sys; j=json.load(sys.stdin); print(j['cpu']['identity'] + ', libtorch ' + j['torch_version'])") \
  || fail "info --json"
configs=(
  "original|--profile original"
  "optimized-rules|--profile optimized --tune off"
  "optimized-fp32|--profile optimized --precision float32 --native-attention --onednn-linear true --winograd-conv true --refiner-tiling false"
  "optimized-bf16|--profile optimized --precision bfloat16 --native-attention --refiner-tiling true --tile-size 128"
)
out="$work/digest.txt"
echo "cpu: $identity" > "$out"
for c in "${configs[@]}"; do
  name=${c%%|*}; flags=${c#*|}
  cp -r "$src/samples/greenscreen_demo" "$work/$name"
  rm -rf "$work/$name/Output"
  # shellcheck disable=SC2086
  "$cli" inference "$work/$name" --device cpu --frames 1-4 $flags --quiet 2> "$work/$name.err" \
    || fail "$name: $(cat "$work/$name.err")"
  (cd "$work/$name/Output" && find . -type f | sort | xargs sha256sum) | sed "s|^|$name |" >> "$out"
done
"$cli" bench --random-weights --arch small --img-size 256 --frames 1 --warmup 0 --device cpu --json \
  --profile original --profile "optimized:tune=off" --profile "optimized:tune=off,model_precision=float32" \
  > "$work/bench.ndjson" 2> "$work/bench.err" || fail "bench: $(cat "$work/bench.err")"
"${CK_PYTHON:-python3}" - "$work/bench.ndjson" >> "$out" <<'PY' || fail "bench rows"
import json, sys
for line in open(sys.argv[1]):
    j = json.loads(line)
    if "alpha_max_diff" in j:
        print("bench %s alpha %.9g fg %.9g" % (j["profile"], j["alpha_max_diff"], j["fg_max_diff"]))
PY
if [ -n "$record" ]; then cp "$out" "$record"; echo "recorded $(wc -l < "$out") lines to $record"; exit 0; fi
golden=""
for g in "$src"/tests/golden/outputs.*.txt; do
  [ -f "$g" ] && [ "$(head -1 "$g")" = "cpu: $identity" ] && golden=$g
done
if [ -z "$golden" ]; then
  echo "golden outputs: skipped, no record for this CPU ($identity); make one with --record"
  exit 0
fi
diff "$golden" "$out" > "$work/diff.txt" || fail "outputs differ from $golden: $(head -20 "$work/diff.txt")"
echo "golden outputs: ok ($(($(wc -l < "$out") - 1)) digests identical to $golden)"
