#!/bin/sh
# Issue 47 through the real binary (run by cli_tune.sh): the plan cache never outgrows its
# reader (an import past 8 MiB is refused whole, the cache left byte for byte), dead writers'
# temporary files are removed and live ones kept, plan keys and reasons reach the terminal
# escaped (info, profiles show, tune, job plan; info --json and NDJSON as JSON escapes), an
# empty value given to any path flag is a usage error naming it, and deeply nested JSON in a
# cache, an import file, a job or profile file and a serve request is refused, not a crash.
# Usage: cli_plan_cache.sh CLI WORKDIR FIXTURES PYTHON
set -u
cli=$1; work=$2; fx=$3; py=$4
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work"; mkdir -p "$work"
export CORRIDORKEY_TUNE_CACHE="$work/cache/tune.json"
esc=$(printf '\033'); bel=$(printf '\007')
# raw ESC or BEL in a file: what sets a terminal's title
raw_controls() { grep -q -e "$esc" -e "$bel" "$1"; }

# A cache file of N plans "PREFIX i", each with a reason of WHY bytes.
plans() {
  "$py" - "$@" <<'PY'
import json, sys
out, prefix, n, why = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
plans = {f"{prefix} {i}": {"origin": "trials", "trial_ms": 1, "decisions": [
    {"option": "model_precision", "value": "float32", "source": "plan", "why": "w" * why,
     "times_ms": {"float32": 100, "bfloat16": 120}}]} for i in range(n)}
json.dump({"format": "corridorkey-engine tune cache", "version": 2, "plans": plans}, open(out, "w"))
PY
}

# 1. Two 5 MB imports into one single-file cache: the second would pass the 8 MiB the reader
#    accepts (it left a 9,014,357-byte file that every later run refused) and is refused whole.
plans "$work/a.json" node-a 5 1000000 && plans "$work/b.json" node-b 5 1000000 || fail "import files"
"$cli" tune --import "$work/a.json" > "$work/ia.txt" 2>&1 || fail "import a: $(cat "$work/ia.txt")"
grep -q "^5 plan(s) copied" "$work/ia.txt" || fail "import a: $(cat "$work/ia.txt")"
cp "$CORRIDORKEY_TUNE_CACHE" "$work/before.json"
"$cli" tune --import "$work/b.json" > "$work/ib.txt" 2>&1; rc=$?
[ $rc = 3 ] || fail "an import past the limit: exit $rc, expected 3: $(cat "$work/ib.txt")"
grep -q "over the 8388608 (8 MiB).*nothing written" "$work/ib.txt" || fail "no clear message: $(cat "$work/ib.txt")"
cmp -s "$CORRIDORKEY_TUNE_CACHE" "$work/before.json" || fail "the refused import changed the cache"
"$cli" info > "$work/info1.txt" 2>&1 || fail "info"
[ "$(grep -c '^  node-a [0-4]$' "$work/info1.txt")" = 5 ] && ! grep -q "not usable" "$work/info1.txt" \
  || fail "the cache is not readable after a refused import: $(head -c 2000 "$work/info1.txt")"
#    a folder cache (one file per plan) takes both
"$cli" tune --import "$work/a.json" --tune-cache "$work/plans/" > /dev/null 2>&1 \
  && "$cli" tune --import "$work/b.json" --tune-cache "$work/plans/" > /dev/null 2>&1 || fail "imports into a folder"
[ "$(ls "$work/plans" | grep -c '^plan-')" = 10 ] || fail "the folder cache lacks plans: $(ls -A "$work/plans")"
#    an ordinary tune into the full file: timed, kept in memory, the file left as it is
plans "$work/full.json" node-c 1 1 || fail "full cache"
"$py" - "$work/full.json" <<'PY' || fail "fill the cache"
import sys
path = sys.argv[1]
text = open(path).read()
pad = 8388608 - 200 - len(text)  # 200 bytes short of the limit: no plan of this engine fits
open(path, "w").write(text.replace('"why": "w"', '"why": "' + "w" * (pad + 1) + '"'))
PY
full="$work/full/tune.json"; mkdir -p "$work/full"; cp "$work/full.json" "$full"
"$cli" tune --checkpoint "$fx/tiny256.pth" --device cpu --img-size 128 --tune-cache "$full" > "$work/tf.txt" 2>&1 \
  || fail "tune into a full cache: $(cat "$work/tf.txt")"
grep -q "kept in memory" "$work/tf.txt" && grep -q "over the 8388608" "$work/tf.txt" \
  || fail "tune into a full cache did not say why it kept the plan: $(cat "$work/tf.txt")"
cmp -s "$full" "$work/full.json" || fail "a tune wrote past the limit"

# 2. Temporary files of dead writers go (this host's with a lock no one holds; an earlier
#    version's unlocked name once an hour old); a live writer's, another host's, a fresh
#    earlier-version one and a user's file stay. (test_tune_cache_limits.cpp kills a real
#    writer with SIGKILL.)
host=$(uname -n | tr -cd 'A-Za-z0-9-' | cut -c1-24); [ -n "$host" ] || host=host
d="$work/cache"
dead=".corridorkey-engine-tune.$host.999999.Dead01"; printf '{"format": ' > "$d/$dead"
live=".corridorkey-engine-tune.$host.1.Live01"; printf x > "$d/$live"
other=".corridorkey-engine-tune.another-node.12.Oth001"; printf x > "$d/$other"
old=".corridorkey-engine-tune.Old001"; printf x > "$d/$old"; touch -d '2 hours ago' "$d/$old"
fresh=".corridorkey-engine-tune.New001"; printf x > "$d/$fresh"
mine=".corridorkey-engine-tune.my.notes"; printf x > "$d/$mine"
flock -o -x "$d/$live" sleep 60 > /dev/null 2>&1 & holder=$!
i=0; while flock -n "$d/$live" true && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
plans "$work/one.json" node-d 1 10 || fail "one plan"
"$cli" tune --import "$work/one.json" > "$work/io.txt" 2>&1 || fail "import one: $(cat "$work/io.txt")"
kill "$holder" 2> /dev/null
for f in "$dead" "$old"; do [ ! -e "$d/$f" ] || fail "a dead writer's file was not removed: $f"; done
for f in "$live" "$other" "$fresh" "$mine"; do [ -e "$d/$f" ] || fail "a file that is not a dead writer's was removed: $f"; done

# 3. Keys and reasons from an imported file, printed: no raw ESC or BEL, no forged line.
"$py" - "$work/evil.json" <<'PY' || fail "evil import"
import json, sys
key = "cpu X\x1b]0;pwned\x07\nmodel_precision float16 (flag)"
d = {"option": "model_precision", "value": "float32", "source": "plan",
     "why": "fast\x1b[2J\nFORGED-REASON", "times_ms": {"n\x1b]0;t\x07": 5}}
json.dump({"format": "corridorkey-engine tune cache", "version": 2,
           "plans": {key: {"origin": "trials", "trial_ms": 1, "decisions": [d]}}}, open(sys.argv[1], "w"))
PY
evil="$work/evil/tune.json"
"$cli" tune --import "$work/evil.json" --tune-cache "$evil" > /dev/null 2>&1 || fail "import the evil plan"
CORRIDORKEY_TUNE_CACHE="$evil" "$cli" info > "$work/e-info.txt" 2>&1 || fail "info"
CORRIDORKEY_TUNE_CACHE="$evil" "$cli" profiles show optimized > "$work/e-prof.txt" 2>&1 || fail "profiles show"
for f in "$work/e-info.txt" "$work/e-prof.txt"; do
  ! raw_controls "$f" || fail "raw control characters printed: $f"
  ! grep -q -e '^model_precision float16 (flag)' -e '^FORGED-REASON' "$f" || fail "a forged line: $(cat "$f")"
  grep -q 'cpu X\\x1b]0;pwned\\x07\\x0amodel_precision float16 (flag)' "$f" || fail "the key is not shown escaped: $(cat "$f")"
  grep -q 'fast\\x1b\[2J\\x0aFORGED-REASON, n\\x1b]0;t\\x07 5 ms' "$f" || fail "the reason is not shown escaped: $(cat "$f")"
done
CORRIDORKEY_TUNE_CACHE="$evil" "$cli" info --json > "$work/e-info.json" || fail "info --json"
! raw_controls "$work/e-info.json" || fail "raw control characters in info --json"
"$py" -c "
import json, sys
j = json.load(open(sys.argv[1]))
assert 'cpu X\x1b]0;pwned\x07\nmodel_precision float16 (flag)' in j['tune_plans'], j['tune_plans']" "$work/e-info.json" \
  || fail "info --json lost the key"
#    tune: this machine's own plan with a file's reason
ktune() { "$cli" tune --checkpoint "$fx/tiny256.pth" --device cpu --img-size 128 --tune-cache "$work/k.json" "$@"; }
ktune > "$work/k1.txt" 2>&1 || fail "tune: $(cat "$work/k1.txt")"
"$py" - "$work/k.json" <<'PY' || fail "poison the plan"
import json, sys
c = json.load(open(sys.argv[1]))
for p in c["plans"].values():
    for d in p["decisions"]:
        d["why"] = "fast\x1b]0;pwned\x07\nFORGED-REASON"
json.dump(c, open(sys.argv[1], "w"))
PY
ktune > "$work/k2.txt" 2>&1 || fail "tune from the poisoned cache: $(cat "$work/k2.txt")"
grep -q "plan: read from the cache" "$work/k2.txt" || fail "the plan was not read: $(cat "$work/k2.txt")"
! raw_controls "$work/k2.txt" && ! grep -q '^FORGED-REASON' "$work/k2.txt" && grep -q 'pwned\\x07\\x0aFORGED' "$work/k2.txt" \
  || fail "tune printed a reason raw: $(cat "$work/k2.txt")"
#    job plan: the nearest cached key's parts
mkdir -p "$work/job/clips/shot/Input"
"$py" -c "
import cv2, numpy as np, sys
im = np.full((90, 160, 3), (40, 200, 60), np.uint8); im[20:70, 50:110] = (120, 110, 100)
cv2.imwrite(sys.argv[1], im)" "$work/job/clips/shot/Input/0001.png" || fail "plate"
"$py" - "$work/k.json" "$work/job/near.json" <<'PY' || fail "near key"
import json, sys
c = json.load(open(sys.argv[1]))
key, plan = next(iter(c["plans"].items()))
parts = ["threads 99\x1b]0;x\x07\nFORGED-JOB" if p.startswith("threads ") else p for p in key.split("; ")]
json.dump({"format": c["format"], "version": 2, "plans": {"; ".join(parts): plan}}, open(sys.argv[2], "w"))
PY
cat > "$work/job/job.yaml" <<YAML
version: 1
name: evil
clips_root: clips
profile: optimized
checkpoint: $fx/tiny256.pth
img_size: 128
device: cpu
tune_cache: near.json
overrides:
  tune: cache-only
YAML
"$cli" job plan "$work/job/job.yaml" > "$work/jp.txt" 2>&1 || fail "job plan: $(cat "$work/jp.txt")"
grep -q "nearest differs in" "$work/jp.txt" || fail "job plan shows no nearest key: $(cat "$work/jp.txt")"
! raw_controls "$work/jp.txt" && ! grep -q '^FORGED-JOB' "$work/jp.txt" && grep -q 'threads 99\\x1b]0;x\\x07\\x0aFORGED-JOB' "$work/jp.txt" \
  || fail "job plan printed a key raw: $(cat "$work/jp.txt")"
#    NDJSON and run.json carry the poisoned reason as JSON escapes only
"$cli" inference "$work/job/clips/shot" --checkpoint "$fx/tiny256.pth" --device cpu --img-size 128 \
  --tune-cache "$work/k.json" --json > "$work/e.ndjson" 2> "$work/e.err" || fail "inference: $(cat "$work/e.err")"
! raw_controls "$work/e.ndjson" && ! raw_controls "$work/job/clips/shot/Output/run.json" \
  || fail "raw control characters in NDJSON or run.json"

# 4. An empty value given to a path flag is a usage error naming the flag; nothing runs.
export CORRIDORKEY_TUNE_CACHE="$work/empty/tune.json"
empty() {  # FLAG-AS-NAMED ARGS...
  flag=$1; shift
  "$cli" "$@" > "$work/e.out" 2> "$work/e.err"; rc=$?
  [ $rc = 2 ] || fail "$* (an empty $flag): exit $rc, expected 2: $(cat "$work/e.err" "$work/e.out" | head -5)"
  # (--flag= is CLI11's "1 required TEXT missing", naming the flag too)
  grep -q -e "$flag.*empty path" -e "$flag: 1 required" "$work/e.err" || fail "$*: the message does not name $flag: $(cat "$work/e.err")"
}
empty --export tune --export ""
empty --export tune --export=
empty --import tune --import ""
empty --tune-cache tune --tune-cache ""
empty --checkpoint tune --checkpoint ""
empty --aoti-package tune --aoti-package ""
empty --profile tune --profile ""
empty paths inference ""
empty --checkpoint-blue inference "$work/job/clips/shot" --checkpoint-blue ""
empty --ocio-config inference "$work/job/clips/shot" --ocio-config ""
empty --output-root inference "$work/job/clips/shot" --output-root ""
empty job job validate ""
empty job job plan ""
empty --tune-cache job run "$work/job/job.yaml" --tune-cache ""
empty --output job export "$work/job/job.yaml" --to slurm -o ""
empty --log-dir job export "$work/job/job.yaml" --to slurm --log-dir ""
empty --listen serve --listen ""
empty --token-file serve --listen tcp:127.0.0.1:0 --token-file ""
empty --checkpoint serve --checkpoint ""
empty paths review ""
empty --output-root review "$work/job/clips" --output-root ""
empty --compare-root review "$work/job/clips" --compare-root ""
empty --ocio-config review "$work/job/clips" --ocio-config ""
empty --ocio-config colorspaces --ocio-config ""
empty --checkpoint bench --checkpoint "" --img-size 128 --profile optimized
empty --load bench --load ""
empty --reference-dir bench --random-weights --arch tiny --img-size 128 --profile optimized --reference-dir ""
empty --checkpoint verify --checkpoint ""
empty input convert "" "$work/x.safetensors"
empty output convert "$fx/tiny128.pth" ""
empty name profiles show ""
[ ! -e "$work/empty" ] || fail "an empty flag value wrote a cache: $(ls -A "$work/empty")"
#    an environment variable set to "" is unset, as XDG's are
CORRIDORKEY_TUNE_CACHE= XDG_CACHE_HOME="$work/xdg" "$cli" info > "$work/env1.txt" 2>&1 || fail "info, empty variable"
grep -q "^tune cache  *$work/xdg/corridorkey-engine/tune.json" "$work/env1.txt" || fail "CORRIDORKEY_TUNE_CACHE='': $(cat "$work/env1.txt")"
CORRIDORKEY_TUNE_CACHE= XDG_CACHE_HOME= HOME="$work/home" "$cli" info > "$work/env2.txt" 2>&1 || fail "info, empty variables"
grep -q "^tune cache  *$work/home/.cache/corridorkey-engine/tune.json" "$work/env2.txt" || fail "XDG_CACHE_HOME='': $(cat "$work/env2.txt")"
export CORRIDORKEY_TUNE_CACHE="$work/cache/tune.json"

# 5. Deep nesting: [ x 200000 and {"a": x 300000 in a cache, an import file, a job file, a
#    profile file and a serve request: refused with a message, never a crash (exit < 128).
"$py" -c "
import sys
open(sys.argv[1], 'w').write('[' * 200000 + ']' * 200000)
open(sys.argv[2], 'w').write('{\"a\":' * 300000 + '1' + '}' * 300000)" "$work/deep-arrays.json" "$work/deep-objects.json" \
  || fail "deep files"
for shape in arrays objects; do
  f="$work/deep-$shape.json"
  cp "$f" "$work/deep-copy.json"
  "$cli" tune --import "$f" > "$work/d1.txt" 2>&1; rc=$?
  [ $rc = 3 ] && grep -q "nested deeper than 32" "$work/d1.txt" || fail "tune --import deep $shape: exit $rc: $(head -c 400 "$work/d1.txt")"
  CORRIDORKEY_TUNE_CACHE="$f" "$cli" info > "$work/d2.txt" 2>&1 || fail "info on a deep $shape cache: exit $?"
  grep -q "not usable.*nested deeper than 32" "$work/d2.txt" || fail "info on a deep $shape cache: $(head -c 400 "$work/d2.txt")"
  cmp -s "$f" "$work/deep-copy.json" || fail "a deep $shape cache was rewritten"
  cp "$f" "$work/deep.yaml"
  "$cli" job validate "$work/deep.yaml" > "$work/d3.txt" 2>&1; rc=$?
  [ $rc = 2 ] && grep -q "deep.yaml" "$work/d3.txt" || fail "job validate deep $shape: exit $rc: $(head -c 400 "$work/d3.txt")"
  "$cli" profiles show "$work/deep.yaml" > "$work/d4.txt" 2>&1; rc=$?
  [ $rc = 2 ] && grep -q "deep.yaml" "$work/d4.txt" || fail "a deep $shape profile: exit $rc: $(head -c 400 "$work/d4.txt")"
  { cat "$f"; echo; echo '{"jsonrpc":"2.0","id":2,"method":"server.shutdown"}'; } \
    | "$cli" serve --stdio > "$work/d5.txt" 2> "$work/d5.err"; rc=$?
  [ $rc = 0 ] && grep -q '"code":-32600.*nested deeper' "$work/d5.txt" \
    || fail "serve, a deep $shape request: exit $rc: $(head -c 400 "$work/d5.txt" "$work/d5.err")"
done
# 6. tune_cache is a job key and a flag, not a profile key (a run-level field: docs/profiles.md)
printf 'engine: optimized\ntune_cache: %s/p-plans/\n' "$work" > "$work/p-tc.yaml"
"$cli" profiles show "$work/p-tc.yaml" > "$work/ptc.txt" 2>&1; rc=$?
[ $rc = 2 ] && grep -q "unknown key 'tune_cache'" "$work/ptc.txt" || fail "a profile setting tune_cache: exit $rc: $(cat "$work/ptc.txt")"
"$cli" job run "$work/job/job.yaml" --tune-cache "$work/jr-plans/" --quiet > "$work/jr.txt" 2>&1 \
  || fail "job run --tune-cache: $(cat "$work/jr.txt")"
grep -q "no plan cached .*$work/jr-plans/" "$work/jr.txt" || fail "job run did not use --tune-cache: $(cat "$work/jr.txt")"
echo "cli plan cache: ok"
