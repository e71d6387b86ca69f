#!/usr/bin/env bash
# README main-job command: set up (idempotent), build, and key the bundled sample clip with
# the bundled model (checkpoints/greenformer_small_synthetic384.ts, trained on procedural
# green-screen data; samples/greenscreen_demo was held out from its training).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh"
build=${CK_BUILD:-$root/build}
cli="$build/apps/corridorkey-engine/corridorkey-engine"
clip="$root/samples/greenscreen_demo"
"$cli" inference "$clip" --profile optimized --precision float32 --device auto
echo
echo "Outputs: $clip/Output/{FG,Matte,Processed,Comp}/ (Comp/*.png to look at first)."
echo "With the published weights: $cli inference /path/to/clip --checkpoint CorridorKey.safetensors --img-size 2048 (a CorridorKey.pth loads too; checkpoints/README.md)"
