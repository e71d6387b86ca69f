#!/usr/bin/env bash
# README main-job command: set up (idempotent), build, and run the engine on the bundled
# default checkpoint.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh"
build=${CK_BUILD:-$root/build}
cli="$build/apps/corridorkey-engine/corridorkey-engine"
"$cli" info
"$cli" verify --checkpoint "$root/checkpoints/greenformer_tiny_random128.ts"
