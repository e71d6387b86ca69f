#!/usr/bin/env bash
# One command for a lent GPU machine: builds the model-only tree (LibTorch from the Python
# found on PATH, CUDA when that torch has it and nvcc matches; no -dev packages needed:
# without nlohmann-json the plan cache keeps its plans in memory),
# then runs corridorkey-model-check at 512, 1024 and 2048 for every profile in float16 and
# bfloat16, and prints one table plus a JSON file (gpu-check/results.json).
#
#   scripts/gpu-check.sh [BUDGET_SECONDS]      default 480 (8 minutes, build included)
#   CK_GPU_CHECK_SIZES="512 1024" CK_GPU_CHECK_ARCH=tiny   other sizes / the tiny model (smoke)
#
# The budget is kept: sizes run smallest first, each with the time it has left, and the
# largest ones are dropped when an estimate (4x the previous size's time) does not fit.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
budget=${1:-480}
start=$(date +%s)
left() { echo $(( budget - ($(date +%s) - start) )); }
py=${CK_PYTHON:-$(command -v python3)}
out=${CK_GPU_OUT:-$root/gpu-check}
build=$out/build
mkdir -p "$out"
log() { printf '[gpu-check %4ss] %s\n' "$(( $(date +%s) - start ))" "$*" >&2; }

"$py" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpu', torch.cuda.is_available() and torch.cuda.get_device_name(0))" \
  || { echo "no usable torch in $py"; exit 2; }
gen=()
[ -f "$build/CMakeCache.txt" ] || gen=(-G Ninja)
log "configure + build (model-only)"
cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DCK_MODEL_ONLY=ON \
      -DCK_PYTHON="$py" -DCK_USE_CCACHE=OFF > "$out/configure.log" 2>&1 \
  || { tail -30 "$out/configure.log"; exit 3; }
cmake --build "$build" --parallel "$(nproc)" --target corridorkey-model-check > "$out/build.log" 2>&1 \
  || { grep -m 20 -B 2 -A 6 "error" "$out/build.log"; exit 3; }
check=$build/apps/corridorkey-model-check/corridorkey-model-check
device=cuda
"$py" -c "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)" || device=cpu
log "built; device $device; $(left)s left"
# The strongest baseline: the PyTorch eager reference (tools/bench_reference.py, current timm)
# on the same weights and input, when this Python has timm (it needs torchvision too).
reference=0
if "$py" -c "import sys; sys.path.insert(0, '$root/tools'); import greenformer_ref" 2>/dev/null; then
  reference=1
else
  log "no timm in $py: the PyTorch reference rows are skipped"
fi

status=0
prev=0
results=()
arch=${CK_GPU_CHECK_ARCH:-hiera_base_plus}
for size in ${CK_GPU_CHECK_SIZES:-512 1024 2048}; do
  if [ "$prev" -gt 0 ] && [ $(( prev * 4 )) -gt "$(left)" ]; then
    log "skipping img_size $size and larger: estimated $(( prev * 4 ))s, $(left)s left"
    break
  fi
  t0=$(date +%s)
  json=$out/results_$size.json
  # Bounds at the two smaller sizes (they do not change with size); profiles at every size.
  bounds=()
  [ "$size" -gt 1024 ] && bounds=(--no-bounds)
  timeout "$(left)" "$check" --device "$device" --arch "$arch" --img-size "$size" --precisions float16,bfloat16 \
      --frames 3 --warmup 1 "${bounds[@]}" --json "$json" 2>&1 | tee "$out/check_$size.log"
  rc=${PIPESTATUS[0]}
  if [ "$reference" = 1 ] && [ "$rc" -le 1 ]; then
    inputs=$out/inputs_$size
    "$check" --device "$device" --arch "$arch" --img-size "$size" --no-bounds --no-profiles --save-inputs "$inputs" > /dev/null
    for v in "reference float32" "reference float16" "reference-fast float16"; do
      set -- $v
      timeout "$(left)" "$py" "$root/tools/bench_reference.py" --weights "$inputs/weights.pt" \
          --input "$inputs/input.pt" --arch "$arch" --img-size "$size" --variant "$1" \
          --precision "$2" --frames 3 --warmup 1 --device "$device" \
          | tail -1 > "$out/reference_${size}_$1_$2.json" || log "reference $1 $2 at $size failed"
    done
    rm -rf "$inputs"
  fi
  prev=$(( $(date +%s) - t0 ))
  case $rc in
    0) results+=("$json") ;;
    1) results+=("$json"); status=1; log "img_size $size: a bound failed" ;;
    124) log "img_size $size: out of time"; break ;;
    *) log "img_size $size: error (exit $rc)"; status=$rc ;;
  esac
done

"$py" - "$out/results.json" "${results[@]}" <<'PY'
import glob, json, os, sys
out, files = sys.argv[1], sys.argv[2:]
runs = [json.load(open(f)) for f in files]
refs = []
for f in sorted(glob.glob(os.path.join(os.path.dirname(out), "reference_*.json"))):
    try:
        r = json.load(open(f))
    except ValueError:
        continue
    r["img_size"] = int(os.path.basename(f).split("_")[1])
    refs.append(r)
json.dump({"runs": runs, "reference": refs}, open(out, "w"), indent=1)
print(f"\n{'size':>5} {'profile':<13} {'precision':<10} {'exec':<10} {'ms':>9} {'enc':>8} {'dec':>7} {'ref':>8} {'alloc MiB':>10} {'resv MiB':>9} {'drift':>9}")
for r in runs:
    for p in r["profiles"]:
        print(f"{r['img_size']:>5} {p['profile']:<13} {p['precision']:<10} {p['exec']:<10} {p['median_ms']:>9.1f} "
              f"{p['encoder_ms']:>8.1f} {p['decoders_ms']:>7.1f} {p['refiner_ms']:>8.1f} "
              f"{p['peak_allocated']/2**20:>10.1f} {p['peak_reserved']/2**20:>9.1f} {p['alpha_drift']:>9.2e}")
for r in refs:
    name = r["variant"] + (" CL" if r["channels_last"] else "")
    print(f"{r['img_size']:>5} {name:<13} {r['precision']:<10} {'PyTorch':<10} {r['median_ms']:>9.1f} "
          f"{r['encoder_ms']:>8.1f} {r['decoders_ms']:>7.1f} {r['refiner_ms']:>8.1f} "
          f"{r['cuda_peak_allocated_mib']:>10.1f} {r['cuda_peak_reserved_mib']:>9.1f} {'':>9}")
for r in runs:
    for c in r["checks"]:
        print(f"{r['img_size']:>5} {'ok' if c['pass'] else 'FAIL':<4} {c['name']:<55} {c['value']:.3e} <= {c['bound']:.0e}")
print(f"\nwritten: {out}")
PY
log "done, exit $status"
exit $status
