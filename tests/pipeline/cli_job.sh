#!/bin/bash
# Render-farm jobs through the real binary: validate, plan, idempotent chunks, and the two
# scheduler exports run by real schedulers: Open Job Description (openjd-cli from the venv)
# and Slurm (a single-node cluster started here; exit 77 = visible skip when not installed).
# Usage: cli_job.sh CLI WORKDIR MODE   (MODE: basic | openjd | slurm)
set -u
cli=$1; work=$2; mode=$3
venv_bin=$(dirname "$CK_PYTHON")
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work"; mkdir -p "$work/clips"
# Two clips from the shared synthetic clip generator (tests/support/make_clip.cpp).
"$CK_MAKE_CLIP" "$work/clips/sh010" --frames 5 --size 128x72 --plate png --hint png || fail "clip generation"
"$CK_MAKE_CLIP" "$work/clips/sh020" --frames 3 --size 128x72 --plate png --hint png || fail "clip generation"
cat > "$work/job.yaml" <<YAML
version: 1
name: citest
clips_root: clips
profile: original
device: cpu
chunk_size: 3
outputs: [matte, comp]
YAML
count() { find "$work/clips" -path '*Output/Matte/*.exr' | wc -l; }
case $mode in
basic)
  "$cli" job validate "$work/job.yaml" | grep -q "2 clip(s), 8 frames, 3 chunk(s)" || fail "validate"
  "$cli" job plan "$work/job.yaml" --chunks 3 > "$work/plan.txt" || fail "plan"
  grep -q "chunk 2/3: sh010 frames 3-5 -> .*sh010/Output$" "$work/plan.txt" || { cat "$work/plan.txt"; fail "plan content"; }
  "$cli" job run "$work/job.yaml" --chunk 2/3 --quiet || fail "run chunk 2/3"
  [ "$(count)" -eq 3 ] || fail "chunk 2/3 wrote $(count) mattes, expected 3"
  "$cli" job run "$work/job.yaml" --chunk 2/3 2> "$work/rerun.txt" || fail "rerun"
  grep -q "0 keyed, 3 already done" "$work/rerun.txt" || { cat "$work/rerun.txt"; fail "rerun not idempotent"; }
  # --json: the events and the summary of `inference --json` (one writer, report_json.h)
  "$cli" job run "$work/job.yaml" --chunk 1/3 --json > "$work/chunk1.ndjson" || fail "run chunk 1/3 --json"
  "$CK_PYTHON" - "$work/chunk1.ndjson" <<'PY' || fail "job run --json: $(cat "$work/chunk1.ndjson")"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
s = ev[-1]
assert s["event"] == "summary" and s["frames_done"] >= 1 and s["engine"]["device"] == "cpu", s
assert set(s["stage_sums"]) == {"read_ms", "preprocess_ms", "infer_ms", "encoder_ms", "decoders_ms",
                                "refiner_ms", "postprocess_ms", "write_ms"}, s
done = [e for e in ev if e["event"] == "frame_done"]
assert len(done) == s["frames_done"], (done, s)
assert all(e["timings"]["infer_ms"] > 0 and e["total"] == s["frames_total"] for e in done), done
assert ev[0]["event"] == "job_started" and "plan" in ev[0], ev[0]
PY
  "$cli" job run "$work/job.yaml" --chunk 4/3; [ $? -eq 2 ] || fail "bad --chunk not a usage error"
  # frames past a clip's end are planned up to it, with a warning naming the clip
  printf 'version: 1\nname: past\nclips:\n  - {path: clips/sh020, frames: 2-9}\nprofile: original\ndevice: cpu\n' > "$work/past.yaml"
  "$cli" job plan "$work/past.yaml" > "$work/past.txt" 2>&1 || fail "plan past: $(cat "$work/past.txt")"
  grep -q "clip 'sh020': frames '2-9' reach position 9, but the clip has 3 frames" "$work/past.txt" \
    || fail "no warning for frames past the clip: $(cat "$work/past.txt")"
  # 8 frames make at most 8 chunks: task 1/9 is not chunk 1/8 (which it was run as, exit 0)
  "$cli" job run "$work/job.yaml" --chunk 1/9 2> "$work/chunk9.txt"; rc=$?
  [ $rc -eq 2 ] && grep -q "only 8 chunks" "$work/chunk9.txt" || fail "--chunk 1/9 of 8 frames gave $rc: $(cat "$work/chunk9.txt")"
  # Generated scripts quote every path: run the Slurm script with a stand-in CLI that
  # prints its arguments, for a job file under a hostile folder name.
  odd="$work/q'uote \$(touch pwned) \`touch pwned2\` sp ace"$'\n'"nl"
  mkdir -p "$odd" && ln -s "$work/clips" "$odd/clips" && cp "$work/job.yaml" "$odd/job.yaml" || fail "odd folder"
  "$cli" job export "$odd/job.yaml" --to slurm -o "$work/odd.sbatch" --log-dir "$work" || fail "export odd"
  printf '#!/bin/sh\nfor a in "$@"; do printf "%%s|" "$a"; done\n' > "$work/args.sh" && chmod +x "$work/args.sh"
  sed "s|^exec '[^']*'|exec '$work/args.sh'|" "$work/odd.sbatch" > "$work/odd_run.sh"
  got=$(cd "$work" && SLURM_ARRAY_TASK_ID=1 bash "$work/odd_run.sh") || fail "odd script did not run"
  [ "$got" = "job|run|$odd/job.yaml|--chunk|1/3|--quiet|" ] || fail "arguments mangled: $got"
  [ -z "$(find "$work" -name 'pwned*')" ] || fail "the job path was executed by the shell"
  "$cli" job export "$odd/job.yaml" --to openjd -o "$work/odd.template.yaml" || fail "export openjd odd"
  "$venv_bin/openjd" check "$work/odd.template.yaml" > /dev/null || fail "openjd check of the odd template"
  printf 'clips_root: clips\nchunk_size: -1\n' > "$work/bad.yaml"
  "$cli" job validate "$work/bad.yaml" 2> "$work/bad.txt"; [ $? -eq 2 ] || fail "bad job not exit 2"
  grep -q "bad.yaml:2: key 'chunk_size': invalid value '-1'" "$work/bad.txt" || { cat "$work/bad.txt"; fail "schema message"; }
  ;;
openjd)
  [ -x "$venv_bin/openjd" ] || { echo "SKIPPED: openjd-cli is not installed in the venv"; exit 77; }
  "$cli" job export "$work/job.yaml" --to openjd -o "$work/job.template.yaml" || fail "export openjd"
  "$venv_bin/openjd" check "$work/job.template.yaml" || fail "openjd check"
  "$venv_bin/openjd" run "$work/job.template.yaml" --step key-sh010 --task-param Chunk=2 > "$work/openjd.log" 2>&1 \
    || { tail -20 "$work/openjd.log"; fail "openjd run"; }
  [ -f "$work/clips/sh010/Output/Matte/0004.exr" ] || { tail -20 "$work/openjd.log"; fail "openjd task wrote no output"; }
  [ "$(count)" -eq 3 ] || fail "openjd chunk 2/2 of sh010 (frames 3-5) wrote $(count) mattes, expected 3"
  ;;
slurm)
  # The job file lives in a folder whose name holds a quote, $(...), spaces and a newline:
  # the generated script must pass it as one word and run nothing from it.
  odd="$work/it's \$(touch pwned) \`touch pwned2\` and"$'\n'"a newline"
  mkdir -p "$odd" && ln -s "$work/clips" "$odd/clips" && cp "$work/job.yaml" "$odd/job.yaml" || fail "odd folder"
  conf=$(bash "$(dirname "$0")/slurm/start_slurm.sh" "$work/slurm"); rc=$?
  [ $rc -eq 77 ] && { echo "SKIPPED: $conf"; exit 77; }
  [ $rc -eq 0 ] || { echo "$conf"; fail "slurm did not start"; }
  export SLURM_CONF=$conf
  trap 'bash "$(dirname "$0")/slurm/stop_slurm.sh" "$work/slurm"' EXIT
  "$cli" job export "$odd/job.yaml" --to slurm -o "$work/bad.sbatch" 2> "$work/logdir.txt"; rc=$?
  [ $rc -eq 2 ] && grep -q "log folder" "$work/logdir.txt" || fail "a newline in the default log folder was not refused ($rc)"
  "$cli" job export "$odd/job.yaml" --to slurm -o "$work/job.sbatch" --log-dir "$work" || fail "export slurm"
  jid=$(cd "$work" && sbatch --parsable "$work/job.sbatch") || fail "sbatch"
  for i in $(seq 1 180); do
    [ -z "$(squeue -h -j "$jid" 2>/dev/null)" ] && break
    sleep 1
  done
  [ -z "$(squeue -h -j "$jid" 2>/dev/null)" ] || fail "slurm job $jid still running after 180 s"
  states=$(scontrol show job "$jid" | grep -o 'JobState=[A-Z]*' | sort | uniq -c)
  echo "$states"
  echo "$states" | grep -v -q 'JobState=COMPLETED' && { cat "$work"/citest-*.out; fail "not every array task completed"; }
  [ "$(echo "$states" | awk '{s+=$1} END {print s}')" -eq 3 ] || fail "expected 3 array tasks"
  [ "$(count)" -eq 8 ] || fail "slurm wrote $(count) mattes, expected 8"
  [ -z "$(find "$work" -name 'pwned*')" ] || fail "the job path was executed by the shell"
  ;;
esac
echo "job $mode: ok"
