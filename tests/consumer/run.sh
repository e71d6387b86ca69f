#!/bin/bash
# Installs the build tree into a prefix, builds tests/consumer against it with
# find_package(CorridorKey), and runs it. Usage: run.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1; src=$2
prefix="$build/consumer-install"
rm -rf "$prefix" "$build/consumer-build"
cmake --install "$build" --prefix "$prefix" > "$build/consumer-install.log"
cmake -S "$src/tests/consumer" -B "$build/consumer-build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON > "$build/consumer-configure.log"
cmake --build "$build/consumer-build" > "$build/consumer-build.log"
# No LibTorch on the consumer's include path: the public headers do not need it.
if grep -q "torch/include" "$build/consumer-build/compile_commands.json" 2>/dev/null; then
  echo "FAIL: consumer compiled with LibTorch include paths"; exit 1
fi
"$build/consumer-build/key_frames"
"$build/consumer-build/deprecated_api"
echo "consumer: both APIs ok"
