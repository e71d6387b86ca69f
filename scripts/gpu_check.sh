#!/usr/bin/env bash
# One prepared device check for a session that is lent a GPU (the device tool runs it on
# the GPU machine over a copy of the tree): set up, build with CUDA, run the CUDA tests and
# the GPU benchmarks the issues ask for, and leave the logs in $OUT (or ./gpu_check_out).
#   run:  bash scripts/gpu_check.sh      (about 10 minutes on an H200, most of it the build)
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${OUT:-$root/gpu_check_out}
mkdir -p "$out"
exec > >(tee "$out/gpu_check.log") 2>&1
nvidia-smi || true
CK_JOBS=$(nproc) CK_CMAKE_ARGS="-DCK_WITH_CUDA=ON -DTORCH_CUDA_ARCH_LIST=9.0" "$root/scripts/setup.sh" || exit 1
cli="$root/build/apps/corridorkey-engine/corridorkey-engine"
"$cli" info
ctest --test-dir "$root/build" -L "cuda|unit|model" --output-on-failure
# Parity on the GPU (TF32 off inside verify) and the CUDA GroupNorm kernel's self-test ran above.
"$cli" bench --random-weights --arch hiera_base_plus --img-size 2048 --device cuda --frames 3 \
  --profile original --profile optimized --profile performance --precision float16 --json | tee "$out/bench_2048_fp16.ndjson"
"$cli" bench --random-weights --arch hiera_base_plus --img-size 1024 --device cuda --frames 5 \
  --profile original --profile optimized:model_precision=float32 --profile optimized \
  --profile optimized:compile_mode=reduce-overhead --json | tee "$out/bench_1024.ndjson"
"$cli" bench --pipeline --random-weights --arch hiera_base_plus --img-size 2048 --device cuda \
  --profile optimized --read-workers 4 --write-workers 8 | tee "$out/pipeline_2048.txt"
