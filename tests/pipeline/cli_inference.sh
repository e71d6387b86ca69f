#!/bin/sh
# The inference command through the real binary: outputs, NDJSON, exit codes, resume.
# Usage: cli_inference.sh CLI WORKDIR   (needs the project venv's python for the clip)
set -u
cli=$1; work=$2
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work"; mkdir -p "$work"
"$CK_PYTHON" - "$work/clip" <<'PY' || fail "clip generation"
import sys, os, numpy as np, torch
root = sys.argv[1]
os.makedirs(root + "/Input"); os.makedirs(root + "/AlphaHint")
from PIL import Image
for f in range(3):
    y, x = np.mgrid[0:90, 0:160]
    inside = ((x - 70 - 3 * f) ** 2 + (y - 45) ** 2) < 30 ** 2
    rgb = np.where(inside[..., None], [200, 90, 60], [20, 210, 30]).astype(np.uint8)
    Image.fromarray(rgb).save(f"{root}/Input/f{f + 1}.png")
    Image.fromarray((inside * 255).astype(np.uint8)).save(f"{root}/AlphaHint/f{f + 1}.png")
PY
# 1. keys all frames, NDJSON events, exit 0
"$cli" inference "$work/clip" --profile original --device cpu --json > "$work/events.ndjson"; rc=$?
[ $rc -eq 0 ] || fail "exit code $rc"
grep -q '"event":"frame_done"' "$work/events.ndjson" || fail "no frame_done event"
grep -q '"event":"summary"' "$work/events.ndjson" || fail "no summary"
for d in FG Matte Processed; do [ -f "$work/clip/Output/$d/f2.exr" ] || fail "missing $d/f2.exr"; done
[ -f "$work/clip/Output/Comp/f3.png" ] || fail "missing Comp/f3.png"
# 2. --skip-existing: nothing left to do
"$cli" inference "$work/clip" --profile original --device cpu --skip-existing --json > "$work/skip.ndjson" || fail "skip run"
grep -q '"frames_skipped":3' "$work/skip.ndjson" || fail "skip-existing did not skip"
# 3. usage error: exit 2
"$cli" inference "$work/clip" --outputs fg,alpha --quiet; rc=$?
[ $rc -eq 2 ] || fail "bad --outputs gave $rc, expected 2"
# 4. input error with --on-error stop: exit 3; with skip: exit 5
printf 'garbage' > "$work/clip/Input/f2.png"
"$cli" inference "$work/clip" --profile original --device cpu --quiet --read-workers 1; rc=$?
[ $rc -eq 3 ] || fail "corrupt frame gave $rc, expected 3"
"$cli" inference "$work/clip" --profile original --device cpu --quiet --on-error skip; rc=$?
[ $rc -eq 5 ] || fail "corrupt frame with --on-error skip gave $rc, expected 5"
# 5. model error: exit 4
"$cli" inference "$work/clip" --checkpoint "$work/none.pth" --quiet; rc=$?
[ $rc -eq 3 ] || fail "missing checkpoint file gave $rc, expected 3"
ls -a "$work/clip/Output/"* | grep -q '\.tmp' && fail "temporary file left behind"
echo "cli inference: ok"
