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

# 4b. a cache of the previous format (version 1: plan keys with the CPU identity's old flags
#     hash) is said once, its plans timed again, and the file replaced in this version
old="$work/old/tune.json"; mkdir -p "$work/old"
printf '{"format": "corridorkey-engine tune cache", "version": 1, "plans": {"k": {"origin": "trials", "trial_ms": 1, "decisions": []}}}\n' > "$old"
tune --img-size 128 --tune-cache "$old" > "$work/o.txt" 2>&1 || fail "tune over an old cache: $(cat "$work/o.txt")"
[ "$(grep -c "tune cache $old was written by an older engine (cache version 1" "$work/o.txt")" = 1 ] \
  || fail "no single note for an old cache: $(cat "$work/o.txt")"
grep -q "plan: timed now" "$work/o.txt" || fail "the old cache's plans were not timed again: $(cat "$work/o.txt")"
"$py" -c "import json,sys; c=json.load(open(sys.argv[1])); assert c['version'] == 2 and 'k' not in c['plans'], c" "$old" \
  || fail "the old cache was not replaced in this version: $(cat "$old")"

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
# 8. (issue 38) A folder cache for a farm: one file per plan, no lock; plans exported and
#    imported between caches; cache-only never times; the trials' cost in the NDJSON
#    events and the text summary; `job plan` says whether a node has its plan, and what missed.
share="$work/share/plans/"
tune --img-size 128 --tune-cache "$share" > "$work/f1.txt" 2>&1 || fail "tune into a folder: $(cat "$work/f1.txt")"
grep -q "plan: timed now" "$work/f1.txt" || fail "folder tune did not time: $(cat "$work/f1.txt")"
[ "$(ls -A "$share" | grep -c '^plan-[0-9a-f]*\.json$')" = 1 ] && [ "$(ls -A "$share" | wc -l)" = 1 ] \
  || fail "the folder holds more than one plan file: $(ls -A "$share")"
tune --img-size 128 --tune-cache "$share" > "$work/f2.txt" 2>&1 || fail "tune again from the folder"
grep -q "plan: read from the cache" "$work/f2.txt" || fail "the folder's plan was not read: $(cat "$work/f2.txt")"
"$cli" tune --export "$work/exported.json" --tune-cache "$share" > "$work/ex.txt" 2>&1 \
  && grep -q "^1 plan(s) copied" "$work/ex.txt" || fail "tune --export: $(cat "$work/ex.txt")"
"$cli" tune --import "$work/exported.json" --tune-cache "$work/share/other/" > "$work/im.txt" 2>&1 \
  && grep -q "^1 plan(s) copied" "$work/im.txt" || fail "tune --import: $(cat "$work/im.txt")"
tune --img-size 128 --tune-cache "$work/share/other/" > "$work/f3.txt" 2>&1 || fail "tune on the imported cache"
grep -q "plan: read from the cache" "$work/f3.txt" || fail "the imported plan was not used: $(cat "$work/f3.txt")"
#    inference: trials in the job_started event and the summary, then the cached plan
"$cli" job plan "$work/job/job.yaml" > /dev/null 2>&1  # (the clip of section 5)
key() { "$cli" inference "$work/job/clips/shot" --checkpoint "$fx/tiny256.pth" --device cpu --img-size 160 \
          --profile optimized --tune-cache "$work/share/runs/" "$@"; }
key --json > "$work/run1.ndjson" 2> "$work/run1.err" || fail "inference, empty folder cache: $(cat "$work/run1.err")"
"$py" - "$work/run1.ndjson" trials <<'PY' || fail "trial cost not reported: $(cat "$work/run1.ndjson")"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
start = [e for e in ev if e["event"] == "job_started"][0]
summary = [e for e in ev if e["event"] == "summary"][0]
assert start["plan"]["origin"] == sys.argv[2] and start["plan"]["trial_ms"] > 0, start
assert summary["plan"]["origin"] == sys.argv[2] and summary["plan"]["trial_ms"] == start["plan"]["trial_ms"], summary
PY
key 2> "$work/run2.err" > /dev/null || fail "inference, cached: $(cat "$work/run2.err")"
grep -q "^plan: read from the cache .*share/runs/ (no trials)" "$work/run2.err" || fail "summary line: $(cat "$work/run2.err")"
#    cache-only: with no plan, the flag rules and no trial (a 2048 plan would take minutes)
"$cli" inference "$work/job/clips/shot" --checkpoint "$fx/tiny256.pth" --device cpu --img-size 192 --profile optimized \
  --tune cache-only --tune-cache "$work/share/empty/" --json > "$work/co.ndjson" 2> "$work/co.err" \
  || fail "cache-only: $(cat "$work/co.err")"
grep -q "tune cache-only: no plan cached" "$work/co.err" || fail "cache-only said nothing: $(cat "$work/co.err")"
"$py" -c "
import json, sys
s = [json.loads(l) for l in open(sys.argv[1])][-1]
assert s['event'] == 'summary' and s['plan']['origin'] == 'off' and s['plan']['trial_ms'] == 0, s" "$work/co.ndjson" \
  || fail "cache-only timed: $(tail -1 "$work/co.ndjson")"
[ ! -e "$work/share/empty" ] || [ -z "$(ls -A "$work/share/empty")" ] || fail "cache-only wrote a plan"
#    job plan: the job's tune_cache (relative to the job file) and whether it has the plan
sed "s|^device: cpu|device: cpu\ntune_cache: farm-plans/|" "$work/job/job.yaml" > "$work/job/farm.yaml"
"$cli" job plan "$work/job/farm.yaml" > "$work/jp1.txt" 2>&1 || fail "job plan (farm): $(cat "$work/jp1.txt")"
grep -q "^plan cache: $work/job/farm-plans/ holds no plan" "$work/jp1.txt" || fail "job plan, empty cache: $(cat "$work/jp1.txt")"
#    (job plan timed the plan for the precision; now it is there)
"$cli" job plan "$work/job/farm.yaml" > "$work/jp2.txt" 2>&1 || fail "job plan again"
grep -q "^plan cache: $work/job/farm-plans/ has the plan" "$work/jp2.txt" || fail "job plan, cached: $(cat "$work/jp2.txt")"
sed "s|^device: cpu|device: cpu\nthreads: 1|" "$work/job/farm.yaml" > "$work/job/farm1.yaml"
"$cli" job plan "$work/job/farm1.yaml" > "$work/jp3.txt" 2>&1 || fail "job plan, one thread"
grep -q "^  threads 1 (cached: threads [0-9]*)" "$work/jp3.txt" || [ "$(nproc)" = 1 ] \
  || fail "job plan does not name the part that missed: $(cat "$work/jp3.txt")"
"$cli" job export "$work/job/farm.yaml" --to slurm -o "$work/job/farm.sbatch" || fail "export slurm (farm)"
grep -q -- "--tune-cache '$work/job/farm-plans/'" "$work/job/farm.sbatch" || fail "slurm export lacks the cache: $(cat "$work/job/farm.sbatch")"
"$cli" job export "$work/job/farm.yaml" --to openjd -o "$work/job/farm.openjd.yaml" || fail "export openjd (farm)"
grep -q -- "\"--tune-cache\", \"$work/job/farm-plans/\"" "$work/job/farm.openjd.yaml" \
  || fail "openjd export lacks the cache: $(cat "$work/job/farm.openjd.yaml")"
# 9. (issue 38) bench --roofline: four stages whose nominal GFLOP add up (and the encoder's
#    split into parts, issue 51), the GEMM rate
#    timed once and then read from a rate file beside the plans; a foreign file at that
#    name is read as no rate and left byte for byte as it is
rates="$work/rates/"
roof() { CORRIDORKEY_TUNE_CACHE="$rates" "$cli" bench --random-weights --arch tiny --img-size 128 --profile optimized --precision float32 \
           --frames 1 --warmup 0 --roofline --json --set tune=off; }
roof > "$work/r1.json" 2> "$work/r1.err" || fail "bench --roofline: $(cat "$work/r1.err")"
"$py" - "$work/r1.json" false <<'PY' || fail "roofline row: $(cat "$work/r1.json")"
import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
st = {s["stage"]: s for s in r["roofline"] if not s["part_of"]}
assert list(st) == ["encoder", "decoders", "refiner", "total"], st
assert all(s["gflop"] > 0 and s["ms"] > 0 and s["of_gemm"] > 0 for s in st.values()), st
parts = st["encoder"]["gflop"] + st["decoders"]["gflop"] + st["refiner"]["gflop"]
assert abs(parts - st["total"]["gflop"]) < 1e-9 * parts, st
# (issue 51) the encoder split, from one instrumented frame: named parts in order, their
# FLOPs summing to the encoder's, each timed, attention's exponentials beside it, and the
# parts' times summing to that frame's encoder time (the note names it).
enc = [s for s in r["roofline"] if s["part_of"] == "encoder"]
assert [s["stage"] for s in enc] == ["global attention", "windowed attention", "linear", "other"], enc
assert abs(sum(s["gflop"] for s in enc) - st["encoder"]["gflop"]) < 1e-9 * st["encoder"]["gflop"], enc
assert all(s["ms"] > 0 for s in enc[:3]) and enc[3]["gflop"] == 0, enc
assert enc[0]["exp_g"] > 0 and enc[1]["exp_g"] > 0 and enc[2]["exp_g"] == 0, enc
import re
frame = float(re.search(r"its encoder took ([0-9.]+) ms", r["notes"]).group(1))
assert abs(sum(s["ms"] for s in enc) - frame) <= 0.05 * frame + 0.2, (enc, frame)
assert abs(st["total"]["gflops"] / r["gemm"]["gflops"] - st["total"]["of_gemm"]) < 1e-9, r
assert r["gemm"]["precision"] == "float32" and r["gemm"]["gflops"] > 0, r["gemm"]
assert r["gemm"]["cached"] == (sys.argv[2] == "true"), r["gemm"]
PY
rate=$(ls "$rates" | grep '^rate-[0-9a-f]*\.json$') || fail "no rate file in $rates: $(ls -A "$rates")"
roof > "$work/r2.json" 2> "$work/r2.err" || fail "bench --roofline again"
"$py" - "$work/r2.json" true <<'PY' || fail "the rate was not read from the cache: $(cat "$work/r2.json")"
import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
assert r["gemm"]["cached"] is True and r["gemm"]["trial_ms"] == 0, r["gemm"]
PY
printf 'my notes\n' > "$rates/$rate"
roof > "$work/r3.json" 2> "$work/r3.err" || fail "bench --roofline over a foreign file"
"$py" -c "
import json, sys; r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
assert r['gemm']['cached'] is False and 'left as it is' in r['notes'], r" "$work/r3.json" \
  || fail "a foreign rate file was used, or not said: $(cat "$work/r3.json")"
[ "$(cat "$rates/$rate")" = "my notes" ] || fail "a foreign rate file was replaced"
# 10. (issue 47) the cache never outgrows its reader, dead writers' files go, keys and reasons
#     print escaped, empty path flags are usage errors, deep JSON is refused: its own script
sh "$(dirname "$0")/cli_plan_cache.sh" "$cli" "$work/plan_cache" "$fx" "$py" || fail "plan cache (above)"
echo "cli tune: ok"
