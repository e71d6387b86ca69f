#!/bin/sh
# native_precision.sh PRECISION COMMAND [ARGS...]
# Runs COMMAND with CK_TEST_PRECISION=PRECISION when this CPU runs PRECISION natively, else
# says why and exits 77, which ctest reports as skipped (SKIP_RETURN_CODE 77). float32 always
# runs. bfloat16 runs where the CPU has bf16 dot products (avx512_bf16 or amx_bf16): the same
# flags the engine's precision rule reads (engine/src/runtime/system.cpp). A CPU without them
# would only emulate bfloat16, 3-5x slower than float32, which no user's plan picks there.
# docs/testing.md, "Tests that depend on the CPU".
set -u
precision=$1
shift
case $precision in
  float32) ;;
  bfloat16)
    if ! grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | grep -qwE 'avx512_bf16|amx_bf16'; then
      echo "SKIPPED: this CPU has no native bfloat16 (neither avx512_bf16 nor amx_bf16 in /proc/cpuinfo)"
      exit 77
    fi
    ;;
  *)
    echo "native_precision.sh: precision '$precision': expected float32 or bfloat16" >&2
    exit 2
    ;;
esac
CK_TEST_PRECISION=$precision
export CK_TEST_PRECISION
exec "$@"
