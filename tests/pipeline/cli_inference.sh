#!/bin/sh
# The inference command through the real binary: outputs, NDJSON, exit codes, resume.
# Usage: cli_inference.sh CLI WORKDIR   (CK_MAKE_CLIP: the test clip generator)
set -u
cli=$1; work=$2
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work"; mkdir -p "$work"
# The shared synthetic clip (tests/support/make_clip.cpp): 3 frames f1..f3.png, 8-bit.
"$CK_MAKE_CLIP" "$work/clip" --frames 3 --size 160x90 --plate png --hint png --prefix f --digits 1 \
  || fail "clip generation"
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
