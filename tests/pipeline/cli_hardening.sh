#!/bin/bash
# Hostile inputs through the real binary (issue 20, "Hardening, round three"): each case
# is a real folder tree, the real CLI, and the exit code and message it must give.
# Usage: cli_hardening.sh CLI WORKDIR   (CK_MAKE_CLIP: the test clip generator)
set -u
cli=$1; work=$2
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work"; mkdir -p "$work"
key() { "$cli" inference "$@" --profile original --device cpu; }
"$CK_MAKE_CLIP" "$work/base" --frames 2 --size 160x90 --plate png --hint png --prefix f --digits 1 \
  || fail "clip generation"

# 1. Two clips with one folder name under one --output-root: usage error naming both paths,
#    nothing created (before: seqB's frames silently replaced seqA's).
mkdir -p "$work/seqA" "$work/seqB"
cp -r "$work/base" "$work/seqA/sh010" && cp -r "$work/base" "$work/seqB/sh010"
key "$work/seqA/sh010" "$work/seqB/sh010" --output-root "$work/out" --quiet 2> "$work/dup.txt"; rc=$?
[ $rc -eq 2 ] || fail "same-named clips gave $rc, expected 2: $(cat "$work/dup.txt")"
grep -q "seqA/sh010' and '.*seqB/sh010' would both write to" "$work/dup.txt" || fail "message: $(cat "$work/dup.txt")"
[ ! -e "$work/out" ] || fail "output folders created for a refused run"
#    Without --output-root each writes into its own clip folder: fine. Both key.
key "$work/seqA" "$work/seqB" --quiet || fail "same names in their own folders"
[ -f "$work/seqA/sh010/Output/Matte/f2.exr" ] && [ -f "$work/seqB/sh010/Output/Matte/f2.exr" ] || fail "outputs missing"

# 6. A stray file named like a temporary file is left alone with a warning naming it, and
#    the run keys (before: "error: stol", exit 1, on every later run of the clip).
cp -r "$work/base" "$work/stray"
mkdir -p "$work/stray/Output/Matte"
echo mine > "$work/stray/Output/Matte/.ck-tmp.vm.abc.0"
key "$work/stray" 2> "$work/stray.txt"; rc=$?
[ $rc -eq 0 ] || fail "stray temp-like file gave $rc: $(cat "$work/stray.txt")"
grep -q "not written by this engine: .ck-tmp.vm.abc.0" "$work/stray.txt" || fail "no warning: $(cat "$work/stray.txt")"
[ "$(cat "$work/stray/Output/Matte/.ck-tmp.vm.abc.0")" = mine ] || fail "the stray file was touched"

# 9. A closed event stream (`--json | head -1`) stops the events, not the keying: every
#    frame written, one line on stderr, exit code of the frames (before: 141 after 1 frame).
"$CK_MAKE_CLIP" "$work/pipe" --frames 6 --size 160x90 --plate png --hint png --prefix f --digits 1 \
  || fail "clip generation"
key "$work/pipe" --json 2> "$work/pipe.txt" | head -1 > "$work/pipe.head"
rc=${PIPESTATUS[0]}
[ $rc -eq 0 ] || fail "--json | head -1 gave $rc: $(cat "$work/pipe.txt")"
grep -q '"event":"job_started"' "$work/pipe.head" || fail "first event: $(cat "$work/pipe.head")"
[ "$(ls "$work/pipe/Output/Matte" | wc -l)" -eq 6 ] || fail "not every frame written after the stream closed"
[ "$(grep -c "event stream (stdout) closed" "$work/pipe.txt")" -eq 1 ] || fail "stderr: $(cat "$work/pipe.txt")"
[ "$(wc -l < "$work/pipe.txt")" -eq 1 ] || fail "more than one line on stderr: $(cat "$work/pipe.txt")"

# 11. --json: a run that fails outright ends the stream with an error event (before: only
#     text on stderr), with the exit code main() returns.
key "$work/does-not-exist" --json > "$work/fail.ndjson" 2>/dev/null; rc=$?
[ $rc -eq 3 ] || fail "missing clip gave $rc"
"$CK_PYTHON" - "$work/fail.ndjson" <<'PY' || fail "no error event: $(cat "$work/fail.ndjson")"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
assert ev[-1]["event"] == "error" and ev[-1]["kind"] == "input" and ev[-1]["exit_code"] == 3, ev
assert "does-not-exist" in ev[-1]["message"], ev
PY

# 3. Names that are not UTF-8 travel losslessly in JSON events: each byte outside valid
#    UTF-8 as \udcXX (Python's surrogateescape), so os.fsencode gives the bytes back
#    (before: U+FFFD, which loses the name).
mkdir -p "$work/latin/Input" "$work/latin/AlphaHint"
cp "$work/base/Input/f1.png" "$work/latin/Input/$(printf 'pl\351te\377.png')"
cp "$work/base/AlphaHint/f1.png" "$work/latin/AlphaHint/f1.png"
key "$work/latin" --json > "$work/latin.ndjson" 2>/dev/null || fail "non-UTF-8 name: exit $?"
"$CK_PYTHON" - "$work/latin.ndjson" "$work/latin/Input" <<'PY' || fail "names not lossless"
import json, os, sys
want = os.listdir(os.fsencode(sys.argv[2]))[0]
got = [os.fsencode(os.path.basename(e["file"])) for e in map(json.loads, open(sys.argv[1]))
       if e["event"] == "frame_done"]
assert got == [want], (got, want)
PY

# 3. OpenJD exports quote every string: clips named 010, on, yes, true, 1.5 pass the real
#    `openjd check` and come back as the same strings from a YAML reader (before: "String
#    required", and 010 read as 8 or 10). A name that is not UTF-8 cannot be held by the
#    YAML text: refused, exit 3, naming the path.
venv_bin=$(dirname "$CK_PYTHON")
mkdir -p "$work/yjob/clips"
for n in 010 on yes true 1.5; do cp -r "$work/base" "$work/yjob/clips/$n"; done
printf 'version: 1\nname: "007"\nclips_root: clips\nprofile: original\ndevice: cpu\nchunk_size: 1\n' > "$work/yjob/job.yaml"
"$cli" job export "$work/yjob/job.yaml" --to openjd -o "$work/yjob/t.yaml" || fail "export openjd"
"$venv_bin/openjd" check "$work/yjob/t.yaml" > "$work/yjob/check.txt" 2>&1 || fail "openjd check: $(cat "$work/yjob/check.txt")"
"$CK_PYTHON" - "$work/yjob/t.yaml" <<'PY' || fail "YAML round trip"
import sys, yaml
t = yaml.safe_load(open(sys.argv[1]))
assert t["name"] == "007", t["name"]
clips = [s["script"]["actions"]["onRun"]["args"][4] for s in t["steps"]]
assert clips == ["1.5", "010", "on", "true", "yes"], clips
assert all(isinstance(s["name"], str) for s in t["steps"])
PY
cp -r "$work/base" "$work/yjob/clips/$(printf 'caf\351')"
"$cli" job export "$work/yjob/job.yaml" --to openjd -o "$work/yjob/t2.yaml" 2> "$work/yjob/latin.txt"; rc=$?
[ $rc -eq 3 ] && LC_ALL=C grep -q "clips/caf.*is not valid UTF-8" "$work/yjob/latin.txt" || fail "Latin-1 clip name: $rc $(cat "$work/yjob/latin.txt")"
[ ! -e "$work/yjob/t2.yaml" ] || fail "a refused export was written"

# 7. Export writes are checked: /dev/full is an error (before: exit 0), a file-size limit
#    leaves the previous export whole and no temporary file, and -o naming the job file is
#    refused with the job file unchanged.
"$cli" job export "$work/yjob/job.yaml" --to slurm -o /dev/full 2> "$work/full.txt"; rc=$?
[ $rc -eq 3 ] && grep -q "/dev/full: write failed (No space left on device)" "$work/full.txt" || fail "/dev/full: $rc $(cat "$work/full.txt")"
rm -rf "$work/yjob/clips/caf"*
"$cli" job export "$work/yjob/job.yaml" --to slurm -o "$work/yjob/job.sbatch" || fail "slurm export"
before=$(cat "$work/yjob/job.sbatch")
[ -x "$work/yjob/job.sbatch" ] || fail "sbatch script not executable"
# (the message through a pipe: the limit would refuse a file for it too)
msg=$( (ulimit -f 0; "$cli" job export "$work/yjob/job.yaml" --to slurm -o "$work/yjob/job.sbatch" 2>&1) ); rc=$?
[ $rc -eq 3 ] && echo "$msg" | grep -q "job.sbatch: write failed (File too large)" || fail "size limit: $rc $msg"
[ "$(cat "$work/yjob/job.sbatch")" = "$before" ] || fail "the previous export was damaged"
[ -z "$(ls -A "$work/yjob" | grep ck-export)" ] || fail "temporary export file left: $(ls -A "$work/yjob")"
cp "$work/yjob/job.yaml" "$work/yjob/job.yaml.orig"
"$cli" job export "$work/yjob/job.yaml" --to openjd -o "$work/yjob/./job.yaml" 2> "$work/self.txt"; rc=$?
[ $rc -eq 2 ] && grep -q "is the job file itself" "$work/self.txt" || fail "-o JOB: $rc $(cat "$work/self.txt")"
cmp -s "$work/yjob/job.yaml" "$work/yjob/job.yaml.orig" || fail "the job file was overwritten"

# 11. A video beside the image sequence in Input/ is ignored with a warning naming it
#     (before: silently).
cp -r "$work/base" "$work/mixed"
printf 'not really a movie' > "$work/mixed/Input/reference.mov"
key "$work/mixed" 2> "$work/mixed.txt" || fail "video beside images: exit $?"
grep -q "Input: 1 video(s) ignored beside the image sequence: reference.mov" "$work/mixed.txt" || fail "no warning: $(cat "$work/mixed.txt")"
[ "$(ls "$work/mixed/Output/Matte" | wc -l)" -eq 2 ] || fail "frames not keyed"

# 11. --threads beyond the CPUs this process may use (here: an affinity mask of one CPU, as
#     taskset or a Slurm cpuset gives) is bounded with a warning (before: accepted).
cp -r "$work/base" "$work/threads"
taskset -c "$(taskset -pc $$ | sed 's/.*: *//; s/[-,].*//')" "$cli" inference "$work/threads" \
  --profile original --device cpu --threads 64 --frames 1 2> "$work/threads.txt" || fail "--threads 64: exit $?"
grep -q "threads 64: this process may use 1 CPU(s) (affinity mask and cgroup CPU quota); using 1" \
  "$work/threads.txt" || fail "no bound: $(cat "$work/threads.txt")"

# 4. Symbolic link loops and unreadable folders: in a clips root the clip is skipped with a
#    warning and the summary names it, the others are keyed; given directly, exit 3 naming
#    the path (before: "filesystem error: status: Too many levels of symbolic links", exit 1,
#    in inference, job validate, plan and run alike).
mkdir -p "$work/lroot"
cp -r "$work/base" "$work/lroot/good"
ln -s loop "$work/lroot/loop"
cp -r "$work/base" "$work/lroot/badframe" && ln -s f9.png "$work/lroot/badframe/Input/f9.png"
cp "$work/base/AlphaHint/f1.png" "$work/lroot/badframe/AlphaHint/f9.png"
cp -r "$work/base" "$work/lroot/locked" && chmod 000 "$work/lroot/locked/Input"
# root bypasses permissions: drop the capabilities that let it (setpriv, util-linux)
asuser=(); [ "$(id -u)" = 0 ] && asuser=(setpriv --bounding-set=-dac_override,-dac_read_search --)
"${asuser[@]}" "$cli" inference "$work/lroot" --profile original --device cpu --on-error skip --json \
  > "$work/loop.ndjson" 2> "$work/loop.txt"; rc=$?
[ $rc -eq 5 ] || fail "clips root with loops gave $rc: $(cat "$work/loop.txt")"
[ "$(ls "$work/lroot/good/Output/Matte" | wc -l)" -eq 2 ] || fail "the good clip was not keyed"
"$CK_PYTHON" - "$work/loop.ndjson" "$work/lroot" <<'PY' || fail "loops not reported: $(cat "$work/loop.ndjson")"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
root = sys.argv[2]
warn = [e["message"] for e in ev if e["event"] == "warning"]
summary = [e for e in ev if e["event"] == "summary"][0]
for path, why in ((root + "/loop", "symbolic link loop"), (root + "/locked/Input", "Permission denied")):
    assert any(w.startswith(path + ": ") and why in w and w.endswith("clip skipped") for w in warn), (path, warn)
    assert any(f.startswith(path + ": ") and why in f for f in summary["failures"]), (path, summary)
# A frame that is a link loop is that one frame failing, as a broken link or a FIFO is (issue 35).
bad = root + "/badframe/Input/f9.png"
assert any(f.startswith(bad + ": ") and "symbolic link loop" in f for f in summary["failures"]), summary
assert summary["clips"] == 2 and summary["frames_done"] == 4 and summary["frames_failed"] == 1, summary
PY
key "$work/lroot/badframe" --quiet 2> "$work/loop1.txt"; rc=$?
[ $rc -eq 3 ] && grep -q "badframe/Input/f9.png: is a symbolic link loop" "$work/loop1.txt" || fail "loop in a clip: $rc $(cat "$work/loop1.txt")"
key "$work/lroot/loop" --quiet 2> "$work/loop2.txt"; rc=$?
[ $rc -eq 3 ] && grep -q "lroot/loop: symbolic link loop" "$work/loop2.txt" || fail "loop as the path: $rc $(cat "$work/loop2.txt")"
printf 'version: 1\nclips_root: lroot\nprofile: original\ndevice: cpu\n' > "$work/loopjob.yaml"
for sub in validate plan; do
  "$cli" job $sub "$work/loopjob.yaml" > /dev/null 2> "$work/loopjob.txt"; rc=$?
  [ $rc -eq 0 ] && grep -q "lroot/loop: symbolic link loop .*clip skipped" "$work/loopjob.txt" \
    || fail "job $sub with a loop: $rc $(cat "$work/loopjob.txt")"
done
chmod 755 "$work/lroot/locked/Input"

# 2. Frame discovery: dotfiles, Thumbs.db, .DS_Store ignored silently; other files named in
#    one warning; an entry with a frame extension that cannot be read (FIFO, folder, device,
#    undecodable) fails by its path: exit 3 with --on-error stop, exit 5 with skip; the
#    frames keyed plus failed equal the frames found (before: "keyed 2/2" from 6 entries).
cp -r "$work/base" "$work/entries"
touch "$work/entries/Input/.hidden.png" "$work/entries/Input/Thumbs.db" "$work/entries/Input/.DS_Store"
echo notes > "$work/entries/Input/notes.txt"
mkfifo "$work/entries/Input/f3.png"
mkdir "$work/entries/Input/f4.png"
ln -s /dev/null "$work/entries/Input/f5.png"
printf 'garbage' > "$work/entries/Input/f6.png"
for i in 3 4 5 6; do cp "$work/base/AlphaHint/f1.png" "$work/entries/AlphaHint/f$i.png"; done
timeout 120 "$cli" inference "$work/entries" --profile original --device cpu --on-error skip --read-workers 1 \
  --json > "$work/entries.ndjson" 2> "$work/entries.err"; rc=$?
[ $rc -eq 5 ] || fail "unreadable frames with skip gave $rc: $(tail -3 "$work/entries.ndjson")"
"$CK_PYTHON" - "$work/entries.ndjson" "$work/entries/Input" <<'PY' || fail "frame entries: $(cat "$work/entries.ndjson")"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
d = sys.argv[2]
s = [e for e in ev if e["event"] == "summary"][0]
assert s["frames_total"] == 6 and s["frames_done"] == 2 and s["frames_failed"] == 4, s
failed = {e["file"]: e["message"] for e in ev if e["event"] == "frame_failed"}
for f, why in (("f3.png", "FIFO"), ("f4.png", "is a folder"), ("f5.png", "is a device"), ("f6.png", "cannot decode")):
    assert why in failed.get(d + "/" + f, ""), (f, failed)
warn = [e["message"] for e in ev if e["event"] == "warning" and "ignored, not frames" in e["message"]]
assert len(warn) == 1 and warn[0].endswith(": notes.txt"), warn
PY
timeout 120 "$cli" inference "$work/entries" --profile original --device cpu --read-workers 1 --quiet 2> "$work/entries.txt"; rc=$?
[ $rc -eq 3 ] && grep -q "entries/Input/f3.png: is a FIFO" "$work/entries.txt" || fail "with stop: $rc $(cat "$work/entries.txt")"

# 8. Temporary-file cleanup trusts locks, not pids: another process (as in another PID
#    namespace, its pid dead here) holding the flock of its temporary file keeps it; once
#    it lets go, the next run removes it (before: deleted as "left by a killed run").
host=$(hostname | tr -cd 'A-Za-z0-9-' | cut -c1-24)
(exit 0) & deadpid=$!; wait $deadpid
tmpf="$work/stray/Output/Matte/.ck-tmp-l.$host.$deadpid.0"
echo partial > "$tmpf"
flock -x -o "$tmpf" sleep 60 > /dev/null 2>&1 & holder=$!  # -o: only flock holds the lock
sleep 0.5
sleeper=$(pgrep -P $holder)
key "$work/stray" --skip-existing --quiet 2> "$work/lock1.txt" || fail "run beside a live writer: $(cat "$work/lock1.txt")"
[ -f "$tmpf" ] || fail "a live writer's temporary file was deleted"
kill $holder $sleeper; wait $holder 2>/dev/null
key "$work/stray" --skip-existing 2> "$work/lock2.txt" || fail "second run: $(cat "$work/lock2.txt")"
[ ! -e "$tmpf" ] || fail "a dead writer's temporary file was kept"
grep -q "removed 1 temporary file(s) left by a killed run" "$work/lock2.txt" || fail "no warning: $(cat "$work/lock2.txt")"

# 5. A clip with mixed backing and generated hints: frames 1, 2, 4 green, frame 3 blue. The
#    clip is keyed as green, so frame 3's hint is all foreground (mean 1.0): that frame fails,
#    named (before: a garbage matte, exit 0, no word). --on-error decides the rest, and
#    --no-backing-check keys it anyway. The sampled plates' disagreement is still warned about.
"$CK_MAKE_CLIP" "$work/mixbk" --frames 4 --size 160x90 --plate png --hint none --prefix f --digits 1 \
  && "$CK_MAKE_CLIP" "$work/blues" --frames 4 --size 160x90 --plate png --hint none --screen blue \
       --prefix f --digits 1 || fail "clip generation"
cp "$work/blues/Input/f3.png" "$work/mixbk/Input/f3.png"
key "$work/mixbk" --read-workers 1 --quiet 2> "$work/mixbk_stop.txt"; rc=$?
[ $rc -eq 3 ] || fail "no-backing frame with stop gave $rc: $(cat "$work/mixbk_stop.txt")"
grep -q "mixbk/Input/f3.png: no green backing found in this plate" "$work/mixbk_stop.txt" \
  || fail "message: $(cat "$work/mixbk_stop.txt")"
[ -f "$work/mixbk/Output/Matte/f2.exr" ] || fail "frames before the failure not written"
[ ! -e "$work/mixbk/Output/Matte/f3.exr" ] && [ ! -e "$work/mixbk/Output/AlphaHint/f3.png" ] \
  || fail "the failed frame left outputs"
rm -rf "$work/mixbk/Output"
key "$work/mixbk" --on-error skip 2> "$work/mixbk_skip.txt"; rc=$?
[ $rc -eq 5 ] || fail "no-backing frame with skip gave $rc: $(cat "$work/mixbk_skip.txt")"
for f in 1 2 4; do [ -f "$work/mixbk/Output/Matte/f$f.exr" ] || fail "f$f not keyed with skip"; done
[ ! -e "$work/mixbk/Output/Matte/f3.exr" ] || fail "f3 keyed despite no backing"
grep -q "the sampled plates disagree on the backing: the clip is keyed as green, but f3.png (blue)" \
  "$work/mixbk_skip.txt" || fail "no disagreement warning: $(cat "$work/mixbk_skip.txt")"
key "$work/mixbk" --no-backing-check --quiet 2> "$work/mixbk_off.txt" || fail "--no-backing-check: exit $?"
[ -f "$work/mixbk/Output/Matte/f3.exr" ] || fail "--no-backing-check did not key f3"
#    A close-up that the subject fills (a green margin left, hint mean about 0.9) is keyed.
"$CK_MAKE_CLIP" "$work/closeup" --frames 3 --size 160x90 --plate png --hint none --prefix f --digits 1 \
  || fail "clip generation"
"$CK_PYTHON" - "$work/closeup/Input/f2.png" <<'PY' || fail "close-up plate"
import cv2, sys
im = cv2.imread(sys.argv[1])
im[3:87, 6:154] = (120, 150, 200)  # BGR skin tone over 148 x 84 of 160 x 90 (86%)
cv2.imwrite(sys.argv[1], im)
PY
key "$work/closeup" --quiet 2> "$work/closeup.txt" || fail "close-up refused: exit $? $(cat "$work/closeup.txt")"
"$CK_PYTHON" - "$work/closeup/Output/AlphaHint/f2.png" <<'PY' || fail "close-up hint is not mostly foreground"
import cv2, sys
m = cv2.imread(sys.argv[1], cv2.IMREAD_UNCHANGED).mean() / 255
assert 0.8 < m < 0.99, m
PY

# 10. A decode bomb under the pixel limit: a real 1 KB JPEG whose SOF0 is patched to declare
#     16000 x 16000 (before: decoded in full, 35 s and 7.2 GB RSS, then refused for its shape).
#     With a hint: refused for its aspect from the headers. Without (generated hints): the
#     decode budget (pixels x channels x bytes + the float copy, x the read workers) refuses
#     it before decoding, naming it and the sizes; the run's peak RSS stays that of a clean run.
"$CK_MAKE_CLIP" "$work/bomb" --frames 3 --size 160x90 --plate png --hint none --prefix f --digits 1 \
  || fail "clip generation"
"$CK_PYTHON" - "$work/bomb/Input/f2.png" "$work/bomb/Input/f2.jpg" <<'PY' || fail "bomb"
import cv2, sys
assert cv2.imwrite(sys.argv[2], cv2.imread(sys.argv[1]))
b = bytearray(open(sys.argv[2], "rb").read())
i = b.index(b"\xff\xc0")  # SOF0: length, precision, height, width
b[i + 5:i + 9] = (16000).to_bytes(2, "big") * 2
open(sys.argv[2], "wb").write(b)
assert len(b) < 4096, len(b)
PY
cp -r "$work/bomb" "$work/clean" && rm "$work/bomb/Input/f2.png" "$work/clean/Input/f2.jpg"
measure() {  # measure OUT CMD...: exit code, seconds, peak RSS (KiB) of CMD, into OUT
  "$CK_PYTHON" - "$@" <<'PY'
import resource, subprocess, sys, time
t = time.time()
with open(sys.argv[1] + ".err", "w") as err:
    rc = subprocess.call(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=err)
open(sys.argv[1], "w").write("%d %.1f %d\n" % (rc, time.time() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
PY
}
opts="--profile original --device cpu --read-workers 2 --on-error skip --quiet"
measure "$work/clean.m" "$cli" inference "$work/clean" $opts --decode-budget-mb 2000
measure "$work/bomb.m" "$cli" inference "$work/bomb" $opts --decode-budget-mb 2000
read -r rc_c s_c rss_c < "$work/clean.m"; read -r rc_b s_b rss_b < "$work/bomb.m"
[ "$rc_c" -eq 0 ] || fail "clean clip gave $rc_c: $(cat "$work/clean.m.err")"
[ "$rc_b" -eq 5 ] || fail "decode bomb gave $rc_b, expected 5: $(cat "$work/bomb.m.err")"
grep -q "bomb/Input/f2.jpg: header declares 16000x16000 x 3 channels; decoding it would hold 3662 MiB, x 2 read worker(s) = 7324 MiB, more than the decode budget of 2000 MiB (--decode-budget-mb 2000); refused before decoding" \
  "$work/bomb.m.err" || fail "message: $(cat "$work/bomb.m.err")"
[ -f "$work/bomb/Output/Matte/f1.exr" ] && [ -f "$work/bomb/Output/Matte/f3.exr" ] || fail "the other frames not keyed"
# Peak RSS: within 256 MiB of the clean run (a decode would add 3.7 GB), wall time within 30 s.
[ "$rss_b" -lt $((rss_c + 262144)) ] || fail "decode bomb peak RSS ${rss_b} KiB, clean run ${rss_c} KiB"
"$CK_PYTHON" -c "import sys; sys.exit(not float(sys.argv[1]) < float(sys.argv[2]) + 30)" "$s_b" "$s_c" \
  || fail "decode bomb took ${s_b} s, clean run ${s_c} s"
echo "decode bomb: refused in ${s_b} s, peak RSS ${rss_b} KiB (clean run: ${s_c} s, ${rss_c} KiB)"
#     With a hint beside it: refused for its aspect ratio from the headers, before decoding.
"$CK_MAKE_CLIP" "$work/bombh" --frames 1 --size 160x90 --plate png --hint png --prefix f --digits 1 \
  || fail "clip generation"
mv "$work/bomb/Input/f2.jpg" "$work/bombh/Input/f1.jpg" && rm "$work/bombh/Input/f1.png"
timeout 60 "$cli" inference "$work/bombh" --profile original --device cpu --quiet 2> "$work/bombh.txt"; rc=$?
[ $rc -eq 3 ] && grep -q "bombh/Input/f1.jpg: plate 16000x16000 and hint 160x90 have different aspect ratios .*before decoding" \
  "$work/bombh.txt" || fail "bomb with a hint: $rc $(cat "$work/bombh.txt")"
#     The automatic budget (half the memory this process can still use, MemAvailable and the
#     cgroup's room): a PNG header declaring 2^20 x 2^15 RGBA, allowed by a raised
#     --max-pixels, would hold 640 GiB per worker: refused where that is above the budget.
"$CK_MAKE_CLIP" "$work/wide" --frames 3 --size 160x90 --plate png --hint none --prefix f --digits 1 \
  || fail "clip generation"
printf '\211PNG\r\n\032\n\000\000\000\015IHDR\000\020\000\000\000\000\200\000\010\006\000\000\000' > "$work/wide/Input/f2.png"
avail_kb=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
if [ "$avail_kb" -lt $((640 * 1024 * 1024 * 2)) ]; then  # budget (avail / 2) < 2 workers x 640 GiB
  key "$work/wide" --on-error skip --max-pixels 68719476736 --quiet 2> "$work/wide.txt"; rc=$?
  [ $rc -eq 5 ] && grep -q "wide/Input/f2.png: header declares 1048576x32768 x 4 channels; .*decode budget of [0-9]* MiB (half of the [0-9]* MiB this process could still use" \
    "$work/wide.txt" || fail "automatic budget: $rc $(cat "$work/wide.txt")"
fi

# ---- Round four (issue 35) -------------------------------------------------------------------
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bundled_pth="$here/../../checkpoints/greenformer_small_synthetic384.pth"
mode_of() { stat -c %a "$1"; }

# R4.1 The plan cache replaces no file that is not its own: decoys in the test's folder only.
mkdir -p "$work/cache"
printf 'notes\n' > "$work/cache/notes.txt"; chmod 640 "$work/cache/notes.txt"
(cd "$work/cache" && CORRIDORKEY_TUNE_CACHE=notes.txt "$cli" tune --img-size 256 --device cpu > out.txt 2> err.txt) \
  || fail "tune with a foreign cache file: exit $? $(cat "$work/cache/err.txt")"
[ "$(cat "$work/cache/notes.txt")" = notes ] && [ "$(mode_of "$work/cache/notes.txt")" = 640 ] \
  || fail "notes.txt was replaced: $(mode_of "$work/cache/notes.txt") $(head -c 80 "$work/cache/notes.txt")"
grep -q "notes.txt is not usable.*left as it is" "$work/cache/err.txt" || fail "no warning: $(cat "$work/cache/err.txt")"
[ "$(ls -A "$work/cache" | sort | tr '\n' ' ')" = "err.txt notes.txt out.txt " ] \
  || fail "files made beside the cache: $(ls -A "$work/cache")"
printf 'decoy\n' > "$work/cache/decoy"; chmod 600 "$work/cache/decoy"
ln -s decoy "$work/cache/link.json"
CORRIDORKEY_TUNE_CACHE="$work/cache/link.json" "$cli" tune --img-size 256 --device cpu > /dev/null 2> "$work/cache/link.txt" \
  || fail "tune with a linked cache: $(cat "$work/cache/link.txt")"
[ "$(cat "$work/cache/decoy")" = decoy ] && [ "$(mode_of "$work/cache/decoy")" = 600 ] && [ -L "$work/cache/link.json" ] \
  || fail "the link's target was replaced"
grep -q "symbolic link" "$work/cache/link.txt" || fail "no warning for the link: $(cat "$work/cache/link.txt")"
ro="$work/cache/ro.json"
CORRIDORKEY_TUNE_CACHE="$ro" "$cli" tune --img-size 256 --device cpu > /dev/null 2>&1 || fail "tune into ro.json"
chmod 444 "$ro"; cp "$ro" "$work/cache/ro.before"
CORRIDORKEY_TUNE_CACHE="$ro" "$cli" tune --refresh --img-size 256 --device cpu > /dev/null 2> "$work/cache/ro.txt" \
  || fail "tune --refresh with a read-only cache: $(cat "$work/cache/ro.txt")"
cmp -s "$ro" "$work/cache/ro.before" && [ "$(mode_of "$ro")" = 444 ] || fail "a read-only cache was replaced ($(mode_of "$ro"))"
grep -q "read-only" "$work/cache/ro.txt" || fail "no read-only warning: $(cat "$work/cache/ro.txt")"
fallback=$(CK_P=1 "$CK_PYTHON" -c 'import tempfile; print(tempfile.gettempdir())')/corridorkey-engine-tune.json
there=0; [ -e "$fallback" ] && there=1
env -u HOME -u XDG_CACHE_HOME -u CORRIDORKEY_TUNE_CACHE "$cli" tune --img-size 256 --device cpu > /dev/null \
  2> "$work/cache/nohome.txt" || fail "tune without HOME: $(cat "$work/cache/nohome.txt")"
grep -q "no cache folder" "$work/cache/nohome.txt" || fail "no warning without HOME: $(cat "$work/cache/nohome.txt")"
[ $there -eq 1 ] || [ ! -e "$fallback" ] || fail "a cache was written to the shared $fallback"

# R4.2 Input paths that are not regular files: exit 2 naming them, in seconds (a FIFO as
#      --ocio-config blocked open() forever, deaf to SIGINT and SIGTERM).
mkfifo "$work/f.ocio" "$work/fifo.yaml" "$work/fifo.pth"
t0=$(date +%s)
timeout 20 "$cli" inference "$work/base" --ocio-config "$work/f.ocio" --input-colorspace mylog --device cpu \
  --quiet 2> "$work/fifo1.txt"; rc=$?
[ $rc -eq 2 ] && grep -q "OCIO config .*f.ocio: is a FIFO" "$work/fifo1.txt" || fail "FIFO --ocio-config: $rc $(cat "$work/fifo1.txt")"
[ $(( $(date +%s) - t0 )) -lt 15 ] || fail "FIFO --ocio-config took $(( $(date +%s) - t0 )) s"
timeout 20 "$cli" inference "$work/base" --ocio-config "$work/cache" --input-colorspace mylog --device cpu \
  --quiet 2> "$work/fifo2.txt"; rc=$?
[ $rc -eq 2 ] && grep -q "is a folder" "$work/fifo2.txt" || fail "folder --ocio-config: $rc $(cat "$work/fifo2.txt")"
timeout 20 "$cli" job validate "$work/fifo.yaml" > /dev/null 2> "$work/fifo3.txt"; rc=$?
[ $rc -eq 2 ] && grep -q "fifo.yaml: is a FIFO" "$work/fifo3.txt" || fail "FIFO job file: $rc $(cat "$work/fifo3.txt")"
timeout 20 "$cli" inference "$work/base" --profile "$work/fifo.yaml" --device cpu --quiet 2> "$work/fifo4.txt"; rc=$?
[ $rc -eq 2 ] && grep -q "fifo.yaml: is a FIFO" "$work/fifo4.txt" || fail "FIFO profile: $rc $(cat "$work/fifo4.txt")"
timeout 20 "$cli" inference "$work/base" --checkpoint "$work/fifo.pth" --device cpu --quiet 2> "$work/fifo5.txt"; rc=$?
[ $rc -eq 2 ] && grep -q "fifo.pth: checkpoint is not a regular file (a FIFO)" "$work/fifo5.txt" \
  || fail "FIFO checkpoint: $rc $(cat "$work/fifo5.txt")"
#      SIGTERM ends a run in its set-up (here the plan's trials at 2048, 20 s on a 2-core Zen 5),
#      at once, with nothing made (it was ignored until the frames started).
"$cli" inference "$work/base" --img-size 2048 --tune refresh --device cpu --output-root "$work/sigterm_out" \
  --quiet > /dev/null 2> "$work/sigterm.txt" &
pid=$!
sleep 3
t0=$(date +%s)
kill -TERM $pid; wait $pid; rc=$?
[ $rc -eq 143 ] || fail "SIGTERM during set-up gave $rc: $(cat "$work/sigterm.txt")"
[ $(( $(date +%s) - t0 )) -le 3 ] || fail "SIGTERM took $(( $(date +%s) - t0 )) s to end the set-up"
[ ! -e "$work/sigterm_out" ] || fail "the interrupted set-up made output folders"

# R4.3 Truncated frames fail as frames, named: a 10-bit DPX cut in its pixel data (OIIO returned
#      the rows it had, exit 0) and JPEGs cut at 50, 90 and 99% (libjpeg greyed the rest).
"$CK_MAKE_CLIP" "$work/cut" --frames 5 --size 160x90 --plate png --hint png --prefix f --digits 1 \
  || fail "clip generation"
oiiotool "$work/cut/Input/f1.png" -d uint10 -o "$work/cut1.dpx" || fail "oiiotool"
head -c 20000 "$work/cut1.dpx" > "$work/cut/Input/f1.dpx" && rm "$work/cut/Input/f1.png"
for i in 2 3 4; do
  pct=$((i == 2 ? 50 : i == 3 ? 90 : 99))
  "$CK_PYTHON" - "$work/cut/Input/f$i.png" "$work/cut/Input/f$i.jpg" $pct <<'PY' || fail "jpeg"
import cv2, sys
ok, b = cv2.imencode(".jpg", cv2.imread(sys.argv[1]))
open(sys.argv[2], "wb").write(b.tobytes()[: len(b) * int(sys.argv[3]) // 100])
PY
  rm "$work/cut/Input/f$i.png"
done
key "$work/cut" --on-error skip --json > "$work/cut.ndjson" 2> /dev/null; rc=$?
[ $rc -eq 5 ] || fail "truncated frames gave $rc"
"$CK_PYTHON" - "$work/cut.ndjson" <<'PY' || fail "truncated frames: $(grep frame_failed "$work/cut.ndjson")"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
failed = {e["file"].rsplit("/", 1)[-1]: e["message"] for e in ev if e["event"] == "frame_failed"}
assert "truncated DPX" in failed["f1.dpx"], failed
for f in ("f2.jpg", "f3.jpg", "f4.jpg"):
    assert "truncated or corrupt JPEG" in failed[f], failed
s = [e for e in ev if e["event"] == "summary"][0]
assert s["frames_done"] == 1 and s["frames_failed"] == 4, s
PY
#      The whole DPX and a whole JPEG still key.
cp "$work/cut1.dpx" "$work/cut/Input/f1.dpx"
"$CK_PYTHON" -c "import cv2,sys; cv2.imwrite(sys.argv[1], cv2.imread(sys.argv[2]))" "$work/cut/Input/f2.jpg" "$work/base/Input/f2.png"
key "$work/cut" --frames 1-2 --quiet 2> "$work/cut_ok.txt" || fail "whole DPX / JPEG refused: $(cat "$work/cut_ok.txt")"

# R4.4 A mapped checkpoint truncated under the run: exit 4 naming it, not SIGBUS (exit 135);
#      the frames already written are whole.
"$cli" convert "$bundled_pth" "$work/mapped.safetensors" > /dev/null 2>&1 || fail "convert"
"$CK_MAKE_CLIP" "$work/mapped" --frames 24 --size 160x90 --plate png --hint png --prefix f --digits 2 \
  || fail "clip generation"
"$CK_PYTHON" - "$cli" "$work/mapped" "$work/mapped.safetensors" <<'PY' || fail "mapped checkpoint truncated"
import json, os, subprocess, sys
os.environ["OPENCV_IO_ENABLE_OPENEXR"] = "1"
import cv2
cli, clip, ck = sys.argv[1:4]
p = subprocess.Popen([cli, "inference", clip, "--checkpoint", ck, "--mmap", "on", "--profile", "original",
                      "--device", "cpu", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
for line in p.stdout:
    if json.loads(line)["event"] == "frame_done":
        os.truncate(ck, 4096)  # as a sync tool rewriting the file in place would
        break
rest, err = p.communicate(timeout=300)
assert p.returncode == 4, (p.returncode, err[-2000:])
assert ck + ": the checkpoint changed on disk while it was mapped" in err, err[-2000:]
mattes = os.listdir(os.path.join(clip, "Output", "Matte"))
assert mattes and len(mattes) < 24, mattes
for m in mattes:
    assert not m.startswith("."), m  # (a temporary file of the frame in flight may remain)
    assert cv2.imread(os.path.join(clip, "Output", "Matte", m), cv2.IMREAD_UNCHANGED) is not None, m
PY

#      Rewritten in place at the same size (no fault: the new bytes show through the mapping)
#      it keyed on with other weights; now the run stops, exit 4, --on-error skip or not, and
#      every matte it wrote is the one the unchanged checkpoint keys.
"$cli" convert "$bundled_pth" "$work/inplace.safetensors" > /dev/null 2>&1 || fail "convert"
cp -r "$work/mapped" "$work/inplace" && rm -rf "$work/inplace/Output" "$work/mapped/Output"
"$cli" inference "$work/mapped" --checkpoint "$work/inplace.safetensors" --profile original --device cpu \
  --outputs matte --quiet 2> "$work/inplace_ref.txt" || fail "reference keys: $(cat "$work/inplace_ref.txt")"
"$CK_PYTHON" - "$cli" "$work/inplace" "$work/inplace.safetensors" "$work/mapped" <<'PY' || fail "mapped checkpoint rewritten in place"
import json, os, subprocess, sys
cli, clip, ck, ref = sys.argv[1:5]
p = subprocess.Popen([cli, "inference", clip, "--checkpoint", ck, "--mmap", "on", "--profile", "original",
                      "--device", "cpu", "--outputs", "matte", "--on-error", "skip", "--json"],
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
for line in p.stdout:
    if json.loads(line)["event"] == "frame_done":
        size = os.path.getsize(ck)
        with open(ck, "r+b") as f:  # a tool writing new weights into the same file
            f.seek(size // 2)
            f.write(bytes(65536))
        assert os.path.getsize(ck) == size
        break
rest, err = p.communicate(timeout=300)
assert p.returncode == 4, (p.returncode, err[-2000:])
assert ck + ": the checkpoint changed on disk while it was mapped (written in place" in err, err[-2000:]
out = os.path.join(clip, "Output", "Matte")
mattes = [m for m in os.listdir(out) if not m.startswith(".")]
assert mattes and len(mattes) < 24, mattes
for m in mattes:
    a = open(os.path.join(out, m), "rb").read()
    assert a == open(os.path.join(ref, "Output", "Matte", m), "rb").read(), m + " keyed with other weights"
PY

# R4.10 A broken symbolic link among the frames is one failed frame (it stopped the clip, exit 3).
cp -r "$work/base" "$work/blink"
cp "$work/base/AlphaHint/f1.png" "$work/blink/AlphaHint/f3.png"
ln -s nowhere "$work/blink/Input/f3.png"
key "$work/blink" --on-error skip --quiet 2> "$work/blink.txt"; rc=$?
[ $rc -eq 5 ] && grep -q "blink/Input/f3.png: is a broken symbolic link" "$work/blink.txt" \
  || fail "broken link frame: $rc $(cat "$work/blink.txt")"
[ -f "$work/blink/Output/Matte/f1.exr" ] && [ -f "$work/blink/Output/Matte/f2.exr" ] || fail "the other frames not keyed"

# R4.11 A blue-screen model that fails to load leaves no output folders behind.
"$CK_MAKE_CLIP" "$work/blue2" --frames 1 --size 160x90 --plate png --hint png --screen blue --prefix f --digits 1 \
  || fail "clip generation"
"$CK_PYTHON" -c "import torch, safetensors.torch as s, sys; s.save_file({'x': torch.zeros(3)}, sys.argv[1])" \
  "$work/notgf.safetensors" || fail "notgf"
key "$work/blue2" --checkpoint-blue "$work/notgf.safetensors" --output-root "$work/o11" --quiet 2> "$work/o11.txt"; rc=$?
[ $rc -eq 4 ] && grep -q "checkpoint_blue" "$work/o11.txt" || fail "bad blue model: $rc $(cat "$work/o11.txt")"
[ -z "$(find "$work/o11" -type d -empty 2>/dev/null)" ] || fail "empty output folders left: $(find "$work/o11")"

# R4.12 The per-clip colour line is printed in text mode without a terminal, as documented.
key "$work/base" --output-root "$work/o12" 2> "$work/o12.txt" < /dev/null || fail "text mode: $(cat "$work/o12.txt")"
grep -q "^clip base: 2 frames, .*green backing" "$work/o12.txt" || fail "no clip line: $(cat "$work/o12.txt")"

echo "cli hardening: ok"
