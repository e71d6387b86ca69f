#!/bin/bash
# A moved install runs (issue 39): `cmake --install` to a prefix, the prefix renamed, then
# its CLI keys the sample clip from there with the bundled profile and checkpoint, and a host
# program linked to its library finds the moved prefix's data, never the build or source
# tree. Usage: relocated.sh BUILD_DIR SOURCE_DIR WORK_DIR
set -euo pipefail
build=$1; src=$2; work=$3
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work"; mkdir -p "$work"
cmake --install "$build" --prefix "$work/p1" > "$work/install.log"
mv "$work/p1" "$work/p2"
p=$work/p2
lib=$(ls "$p"/lib*/libcorridorkey_engine.so.*.*.* | head -1)
# Nothing installed names the build tree: no RUNPATH into it, no build-tree marker.
for f in "$p/bin/corridorkey-engine" "$lib"; do
  rp=$(readelf -d "$f" | grep -E 'R(UN)?PATH' || true)
  case "$rp" in *"$build"*|*"$src"*) fail "$f: its RUNPATH names the build tree: $rp";; esac
done
[ -z "$(find "$p" -name corridorkey-build-tree)" ] || fail "a build-tree marker was installed"
cli=$p/bin/corridorkey-engine
export CORRIDORKEY_TUNE_CACHE=$work/tune.json
listed=$("$cli" profiles list) || fail "the moved CLI does not start: $listed"
echo "$listed" | grep -qF "profiles in $p/share/corridorkey/profiles" \
  || fail "profiles not read from the moved prefix: $(echo "$listed" | head -1)"
# The sample clip, keyed by the moved CLI with its own default checkpoint.
mkdir -p "$work/clip"
cp -r "$src/samples/greenscreen_demo/Input" "$work/clip/"
"$cli" inference "$work/clip" --frames 1-2 --profile original --json > "$work/inference.ndjson" \
  || fail "inference from the moved prefix: $(tail -3 "$work/inference.ndjson")"
grep -qF "\"checkpoint\":\"$p/share/corridorkey/checkpoints/greenformer_small_synthetic384.ts\"" \
  "$work/inference.ndjson" || fail "not keyed with the moved prefix's checkpoint: $(tail -1 "$work/inference.ndjson")"
[ "$(ls "$work/clip/Output/Matte" | wc -l)" -eq 2 ] || fail "expected 2 mattes"
# A host program on the moved library: its data is the moved prefix's too.
c++ -std=c++17 -I"$p/include" "$src/tests/consumer/print_data_dir.cpp" -o "$work/print_data_dir" \
    -L"$(dirname "$lib")" -lcorridorkey_engine -Wl,-rpath,"$(dirname "$lib")"
out=$("$work/print_data_dir") || fail "host program: $out"
echo "$out"
[ "$(echo "$out" | head -1)" = "data_dir $p/share/corridorkey" ] || fail "the library's data_dir is not the moved prefix's"
echo "$out" | grep -qF "default_checkpoint $p/share/corridorkey/checkpoints/" || fail "default checkpoint not in the prefix"
# $CORRIDORKEY_DATA_DIR names another folder.
[ "$(CORRIDORKEY_DATA_DIR=$src "$work/print_data_dir" | head -1)" = "data_dir $src" ] \
  || fail "CORRIDORKEY_DATA_DIR not honoured"
echo "relocated install: ok"
