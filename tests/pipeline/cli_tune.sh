#!/bin/sh
# The measured plan through the real binary: `tune` fills the cache, a second run reads it,
# two processes tuning at once leave one valid cache with both plans, a corrupt cache is
# left as it is (never replaced: issue 35), `info` lists the plans, and a job export pins one precision for every chunk.
# Usage: cli_tune.sh CLI WORKDIR FIXTURES PYTHON
set -u
cli=$1; work=$2; fx=$3; py=$4
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work"; mkdir -p "$work"
export CORRIDORKEY_TUNE_CACHE="$work/cache/tune.json"
tune() { "$cli" tune --checkpoint "$fx/tiny256.pth" --device cpu "$@"; }

# 1. first use times and caches; the second reads the cache
tune --img-size 128 > "$work/t1.txt" 2>&1 || fail "tune: $(cat "$work/t1.txt")"
grep -q "plan: timed now" "$work/t1.txt" || fail "first tune did not time: $(cat "$work/t1.txt")"
grep -q "^model_precision .* (plan" "$work/t1.txt" || fail "no precision decision: $(cat "$work/t1.txt")"
tune --img-size 128 > "$work/t2.txt" 2>&1 || fail "tune again"
grep -q "plan: read from the cache" "$work/t2.txt" || fail "second tune did not use the cache: $(cat "$work/t2.txt")"
tune --img-size 128 --refresh > "$work/t3.txt" 2>&1 || fail "tune --refresh"
grep -q "plan: timed now" "$work/t3.txt" || fail "--refresh did not time again"

# 2. two processes tuning at once (other sizes) leave one valid cache holding every plan
tune --img-size 160 > "$work/a.txt" 2>&1 & a=$!
tune --img-size 192 > "$work/b.txt" 2>&1 & b=$!
wait $a || fail "concurrent tune A: $(cat "$work/a.txt")"
wait $b || fail "concurrent tune B: $(cat "$work/b.txt")"
n=$("$py" -c "import json,sys; print(len(json.load(open(sys.argv[1]))['plans']))" "$CORRIDORKEY_TUNE_CACHE") \
  || fail "cache is not valid JSON after concurrent tuning: $(cat "$CORRIDORKEY_TUNE_CACHE")"
[ "$n" = 3 ] || fail "expected 3 plans (128, 160, 192), found $n"
left=$(ls -A "$work/cache" | grep -vx -e tune.json -e .corridorkey-engine-tune.lock)
[ -z "$left" ] || fail "temp files left in the cache folder: $left"

# 3. info lists the cache and its plans
"$cli" info > "$work/info.txt" || fail "info"
grep -q "tune cache .*$work/cache/tune.json" "$work/info.txt" || fail "info does not name the cache"
grep -q "img 192" "$work/info.txt" || fail "info does not list the plans: $(cat "$work/info.txt")"

# 4. a corrupt cache is timed around with a warning and left as it is: a file that is not
#    recognisably the engine's is never replaced; removing it lets the next run rebuild it
printf '{"plans": {"x": ' > "$CORRIDORKEY_TUNE_CACHE"
tune --img-size 128 > "$work/c.txt" 2>&1 || fail "tune over a corrupt cache: $(cat "$work/c.txt")"
grep -q "is not usable.*left as it is" "$work/c.txt" || fail "no warning for a corrupt cache: $(cat "$work/c.txt")"
[ "$(cat "$CORRIDORKEY_TUNE_CACHE")" = '{"plans": {"x": ' ] || fail "the corrupt cache was replaced"
rm "$CORRIDORKEY_TUNE_CACHE"
tune --img-size 128 > "$work/c2.txt" 2>&1 || fail "tune after removing it: $(cat "$work/c2.txt")"
"$py" -c "import json,sys; json.load(open(sys.argv[1]))" "$CORRIDORKEY_TUNE_CACHE" || fail "cache not rebuilt"

# 5. a job export pins the planning machine's precision in every chunk's command
mkdir -p "$work/job/clips/shot/Input"
"$py" -c "
import cv2, numpy as np, sys
im = np.full((90, 160, 3), (40, 200, 60), np.uint8)   # green backing (BGR)
im[20:70, 50:110] = (120, 110, 100)                   # a grey subject
cv2.imwrite(sys.argv[1], im)" "$work/job/clips/shot/Input/0001.png" || fail "plate"
cat > "$work/job/job.yaml" <<YAML
version: 1
name: tunetest
clips_root: clips
profile: optimized
checkpoint: $fx/tiny256.pth
img_size: 128
device: cpu
YAML
"$cli" job plan "$work/job/job.yaml" > "$work/plan.txt" 2>&1 || fail "job plan: $(cat "$work/plan.txt")"
p=$(sed -n 's/^precision: \([a-z0-9]*\) (.*/\1/p' "$work/plan.txt")
[ -n "$p" ] || fail "job plan does not say the precision: $(cat "$work/plan.txt")"
"$cli" job export "$work/job/job.yaml" --to slurm -o "$work/job/job.sbatch" || fail "export slurm"
grep -q -- "--precision '$p'" "$work/job/job.sbatch" || fail "slurm export does not pin $p: $(cat "$work/job/job.sbatch")"
"$cli" job export "$work/job/job.yaml" --to openjd -o "$work/job/job.openjd.yaml" || fail "export openjd"
grep -q -- "--precision\", \"$p\"" "$work/job/job.openjd.yaml" || fail "openjd export does not pin $p: $(cat "$work/job/job.openjd.yaml")"
"$cli" job run "$work/job/job.yaml" --chunk 1/1 --precision "$p" --quiet || fail "job run --precision"
[ -s "$work/job/clips/shot/Output/Matte/0001.exr" ] || fail "job run wrote no matte"
# 6. the runs line names the refiner's convolutions once (it used to say "Winograd
#    convolutions, convolutions by Winograd")
tune --img-size 128 --precision float32 --winograd-conv true > "$work/w.txt" 2>&1 || fail "tune winograd: $(cat "$work/w.txt")"
n=$(grep "^runs:" "$work/w.txt" | grep -o -i "winograd" | wc -l)
if grep -q "^winograd_conv true" "$work/w.txt"; then
  [ "$n" = 1 ] || fail "runs line names Winograd $n times: $(cat "$work/w.txt")"
else
  [ "$n" = 0 ] || fail "Winograd named where it does not run: $(cat "$work/w.txt")"
fi
# 7. `profiles show` prints a profile that loads back the same (it printed run settings a
#    profile file refuses), and a partial profile file says what it leaves at original's values
"$cli" profiles show optimized > "$work/mine.yaml" 2> /dev/null || fail "profiles show optimized"
"$cli" profiles show "$work/mine.yaml" > "$work/mine2.txt" 2> "$work/mine2.err" || fail "show its own output: $(cat "$work/mine2.err")"
grep -q "sets .* profile fields" "$work/mine2.err" && fail "a complete profile warned: $(cat "$work/mine2.err")"
grep -v '^#' "$work/mine.yaml" > "$work/a.yaml"; grep -v '^#' "$work/mine2.txt" > "$work/b.yaml"
cmp -s "$work/a.yaml" "$work/b.yaml" || fail "the profile did not load back the same: $(diff "$work/a.yaml" "$work/b.yaml")"
printf 'engine: optimized\nwinograd_conv: true\n' > "$work/part.yaml"
"$cli" profiles show "$work/part.yaml" > /dev/null 2> "$work/part.err" || fail "partial profile"
grep -q "sets 2 of the [0-9]* profile fields" "$work/part.err" || fail "no warning for a partial profile: $(cat "$work/part.err")"
echo "cli tune: ok"
