#!/bin/bash
# Bit-identity across refactors (issue 37): the sample clip keyed through the real CLI in
# fixed configurations of one precision (no timed plan: its choices follow the machine's
# timings), and bench's drift columns on seeded random weights, as sha256 of every output
# file and the drift values, against a record made on the same CPU with the same LibTorch.
#   golden_outputs.sh CLI SOURCE_DIR WORKDIR [--record FILE]
# The precision comes from CK_TEST_PRECISION (float32, the default, or bfloat16; ctest runs
# one test per precision the CPU runs natively, tests/support/native_precision.sh). Every
# configuration pins its precision, so what is checked never depends on a plan's pick.
# A record (tests/golden/outputs.<cpu kind>.txt) is keyed by its first line, the CPU's
# identity and the LibTorch version; its other lines start with their configuration's name.
# This run compares the lines of its own configurations: a record without any says so and
# skips visibly, a configuration the record lacks is named. `--record FILE` writes this
# precision's lines into FILE and keeps the lines of the other precision.
set -u
cli=$1; src=$2; work=$3; record=""
[ "${4:-}" = --record ] && record=${5:?--record needs a file}
precision=${CK_TEST_PRECISION:-float32}
py=${CK_PYTHON:-python3}
fail() { echo "FAIL: $*"; exit 1; }
work="$work/$precision"
rm -rf "$work"; mkdir -p "$work"
export CORRIDORKEY_TUNE_CACHE="$work/tune.json"
# The record is keyed on the CPU and the LibTorch version: either changes the digests.
identity=$("$cli" info --json | "$py" -c \
  "import json,sys; j=json.load(sys.stdin); print(j['cpu']['identity'] + ', libtorch ' + j['torch_version'])") \
  || fail "info --json"
case $precision in
  float32)
    configs=(
      "original|--profile original"
      "optimized-rules-f32|--profile optimized --tune off --precision float32"
      "optimized-fp32|--profile optimized --precision float32 --native-attention --onednn-linear true --winograd-conv true --refiner-tiling false"
    )
    bench_profiles=(original "optimized:tune=off,model_precision=float32") ;;
  bfloat16)
    configs=(
      "optimized-rules-bf16|--profile optimized --tune off --precision bfloat16"
      "optimized-bf16|--profile optimized --precision bfloat16 --native-attention --refiner-tiling true --tile-size 128"
    )
    bench_profiles=("optimized:tune=off,model_precision=bfloat16") ;;
  *) fail "CK_TEST_PRECISION '$precision': expected float32 or bfloat16" ;;
esac
out="$work/digest.txt"
echo "cpu: $identity" > "$out"
for c in "${configs[@]}"; do
  name=${c%%|*}; flags=${c#*|}
  cp -r "$src/samples/greenscreen_demo" "$work/$name"
  rm -rf "$work/$name/Output"
  # shellcheck disable=SC2086
  "$cli" inference "$work/$name" --device cpu --frames 1-4 $flags --quiet 2> "$work/$name.err" \
    || fail "$name: $(cat "$work/$name.err")"
  # run.json (review's record of the run) holds times and paths: not an output to compare.
  (cd "$work/$name/Output" && find . -type f ! -name run.json | sort | xargs sha256sum) | sed "s|^|$name |" >> "$out"
done
bench_args=()
for p in "${bench_profiles[@]}"; do bench_args+=(--profile "$p"); done
"$cli" bench --random-weights --arch small --img-size 256 --frames 1 --warmup 0 --device cpu --json \
  "${bench_args[@]}" > "$work/bench.ndjson" 2> "$work/bench.err" || fail "bench: $(cat "$work/bench.err")"
"$py" - "$work/bench.ndjson" >> "$out" <<'PY' || fail "bench rows"
import json, sys
for line in open(sys.argv[1]):
    j = json.loads(line)
    if "alpha_max_diff" in j:
        print("bench %s alpha %.9g fg %.9g" % (j["profile"], j["alpha_max_diff"], j["fg_max_diff"]))
PY
# The identity as engines before the FNV-1a fix made it (plan cache version 1: an offset
# basis missing a digit, over the first processor's flags line): a record made then on this
# CPU is still this CPU's, its digests unchanged; it says so until it is re-recorded.
prefix_identity=$("$py" - "$identity" <<'PY'
import re, sys
flags = ""
for line in open("/proc/cpuinfo"):
    if not line.strip():
        break
    if line.startswith("flags"):
        flags = line.split(":", 1)[1].rstrip("\n").lstrip(" \t")
        break
h = 1469598103934665603
for c in flags.encode():
    h = ((h ^ c) * 1099511628211) & (2**64 - 1)
print(re.sub(r", flags [0-9a-f]+\)", ", flags %x)" % (h & 0xffffffff), sys.argv[1], count=1))
PY
) || fail "the pre-fix identity"
golden=""
for g in "$src"/tests/golden/outputs.*.txt; do
  [ -f "$g" ] && [ "$(head -1 "$g")" = "cpu: $identity" ] && golden=$g
done
if [ -z "$golden" ]; then
  for g in "$src"/tests/golden/outputs.*.txt; do
    if [ -f "$g" ] && [ "$(head -1 "$g")" = "cpu: $prefix_identity" ]; then
      golden=$g
      echo "note: $g is keyed by this CPU's pre-fix identity ($prefix_identity); re-record it with --record on this CPU"
    fi
  done
fi
[ -n "$record" ] && golden=$record
# Lines are grouped by configuration: a clip configuration's name, or "bench PROFILE".
"$py" - "$out" "$golden" "$record" "$precision" "cpu: $prefix_identity" <<'PY'
import os, sys
out, golden, record, precision, prefix_header = sys.argv[1:6]

def key(line):
    w = line.split()
    return " ".join(w[:2]) if w[0] == "bench" else w[0]

def groups(lines):
    g = {}
    for line in lines:
        g.setdefault(key(line), []).append(line)
    return g

ours = open(out).read().splitlines()
header, mine = ours[0], groups(ours[1:])
theirs = open(golden).read().splitlines() if golden and os.path.exists(golden) else []
if record:
    # Keep the other precision's lines of a record made on this CPU; replace this one's.
    # (or under its pre-fix identity: the same CPU, re-keyed now).
    kept = [l for l in theirs[1:] if key(l) not in mine] if theirs[:1] in ([header], [prefix_header]) else []
    with open(record, "w") as f:
        f.write("\n".join([header] + kept + ours[1:]) + "\n")
    print("recorded %d %s lines to %s (%d lines of other configurations kept)" % (len(ours) - 1, precision, record, len(kept)))
    sys.exit(0)
if not theirs:
    print("golden outputs: skipped, no record for this CPU (%s); make one with --record" % header[5:])
    sys.exit(0)
rec = groups(theirs[1:])
checked = [k for k in mine if k in rec]
missing = [k for k in mine if k not in rec]
if not checked:
    print("golden outputs: skipped, %s has no %s lines for this CPU; make them with --record" % (golden, precision))
    sys.exit(0)
bad = [k for k in checked if rec[k] != mine[k]]
for k in bad:
    diff = [(a, b) for a, b in zip(rec[k], mine[k]) if a != b]
    print("FAIL: %s differs from %s (%d of %d lines), first: %s" % (k, golden, len(diff) or abs(len(rec[k]) - len(mine[k])),
          len(rec[k]), diff[0] if diff else "a different line count"))
if bad:
    sys.exit(1)
for k in missing:
    print("not in the record, unchecked: %s (record it on this CPU with --record)" % k)
n = sum(len(mine[k]) for k in checked)
print("golden outputs: ok (%s: %d digests of %d configurations identical to %s)" % (precision, n, len(checked), golden))
PY
