#!/bin/sh
# Checkpoints as users download them, through the real binary: safetensors (mapped and read),
# a folder of checkpoints, convert, and the blue-screen model; exit codes and messages.
# Usage: cli_checkpoints.sh CLI WORKDIR FIXTURES   (CK_MAKE_CLIP: the test clip generator)
set -u
cli=$1; work=$2; fx=$3
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work"; mkdir -p "$work"
"$CK_MAKE_CLIP" "$work/green" --frames 2 --size 160x90 --plate png --hint png --soft-edge 2 || fail "clip"
"$CK_MAKE_CLIP" "$work/blue" --frames 2 --size 160x90 --plate png --hint png --soft-edge 2 --screen blue || fail "clip"
key() {  # key CLIP OUT [flags...]: the clip into OUT with the original profile in float32
  c=$1; o=$2; shift 2
  "$cli" inference "$c" --output-root "$o" --profile original --precision float32 --device cpu "$@"
}

# 1. the new user's first command: verify a .safetensors (was: "not a checkpoint")
"$cli" verify --checkpoint "$fx/tiny128.safetensors" > "$work/verify.txt" || fail "verify .safetensors"
grep -q "(safetensors)" "$work/verify.txt" || fail "verify does not name the format: $(cat "$work/verify.txt")"

# 2. convert a training .pth; keying with it gives byte-identical files, mapped or read
"$cli" convert "$fx/tiny128.pth" "$work/converted.safetensors" > "$work/convert.txt" || fail "convert"
grep -q "read back bit-identical" "$work/convert.txt" || fail "convert report: $(cat "$work/convert.txt")"
grep -q "ignored optimizer" "$work/convert.txt" || fail "convert does not report the optimizer state"
key "$work/green" "$work/out_pth" --checkpoint "$fx/tiny128.pth" --quiet || fail "key .pth"
key "$work/green" "$work/out_st" --checkpoint "$work/converted.safetensors" --quiet || fail "key converted"
key "$work/green" "$work/out_st_read" --checkpoint "$work/converted.safetensors" --mmap off --quiet || fail "key --mmap off"
for f in Matte/0001.exr FG/0001.exr Processed/0002.exr Comp/0002.png; do
  cmp -s "$work/out_pth/green/$f" "$work/out_st/green/$f" || fail "$f differs between .pth and its conversion"
  cmp -s "$work/out_pth/green/$f" "$work/out_st_read/green/$f" || fail "$f differs with --mmap off"
done
"$cli" convert "$work/converted.safetensors" "$work/converted.safetensors" 2> "$work/self.txt"; rc=$?
[ $rc -eq 2 ] && grep -q "input checkpoint itself" "$work/self.txt" || fail "convert onto itself gave $rc"
"$cli" convert "$fx/evil_system.pth" "$work/evil.safetensors" 2> "$work/evil.txt"; rc=$?
[ $rc -eq 4 ] && [ ! -e "$work/evil.safetensors" ] || fail "convert of a hostile pickle gave $rc"

# 3. a folder: .safetensors preferred, one line says which; two of a kind is exit 2 listing both
mkdir -p "$work/models"
cp "$fx/tiny128_top.pth" "$work/models/CorridorKey.pth"
cp "$work/converted.safetensors" "$work/models/CorridorKey.safetensors"
key "$work/green" "$work/out_dir" --checkpoint "$work/models" --quiet 2> "$work/dir.txt" || fail "folder checkpoint"
grep -q "models/CorridorKey.safetensors (chosen in the folder" "$work/dir.txt" || fail "no choice line: $(cat "$work/dir.txt")"
cp "$fx/tiny128_seed1.safetensors" "$work/models/CorridorKeyBlue_1.0.safetensors"
key "$work/green" "$work/out_dir2" --checkpoint "$work/models" --quiet 2> "$work/dir2.txt"; rc=$?
[ $rc -eq 2 ] && grep -q "CorridorKey.safetensors, CorridorKeyBlue_1.0.safetensors" "$work/dir2.txt" \
  || fail "two .safetensors in a folder gave $rc: $(cat "$work/dir2.txt")"

# 4. broken files: exit 4 naming the file (and the tensor)
head -c 1000 "$work/converted.safetensors" > "$work/cut.safetensors"
key "$work/green" "$work/out_cut" --checkpoint "$work/cut.safetensors" --quiet 2> "$work/cut.txt"; rc=$?
[ $rc -eq 4 ] && grep -q "cut.safetensors" "$work/cut.txt" || fail "truncated file gave $rc: $(cat "$work/cut.txt")"
key "$work/green" "$work/out_u16" --checkpoint "$fx/dtype_u16.safetensors" --quiet 2> "$work/u16.txt"; rc=$?
[ $rc -eq 4 ] && grep -q "tensor 'weight': dtype U16" "$work/u16.txt" || fail "U16 gave $rc: $(cat "$work/u16.txt")"

# 5. the blue-screen model keys the blue clip, unswapped; the events and the summary say so
"$cli" inference "$work/green" "$work/blue" --output-root "$work/out_two" --profile original \
  --precision float32 --device cpu --checkpoint "$work/converted.safetensors" \
  --checkpoint-blue "$fx/tiny128_seed1.safetensors" --json > "$work/two.ndjson" || fail "two-model run"
grep '"event":"clip_started"' "$work/two.ndjson" | grep '"clip":"blue"' | grep -q 'tiny128_seed1.safetensors' \
  || fail "clip_started of the blue clip does not name the blue model"
grep '"event":"clip_started"' "$work/two.ndjson" | grep '"clip":"green"' | grep -q 'converted.safetensors' \
  || fail "clip_started of the green clip does not name the main model"
grep '"event":"summary"' "$work/two.ndjson" | grep -q '"clip_models":\[{"clip":"green","checkpoint":"[^"]*converted.safetensors"' \
  || fail "summary clip_models: $(grep summary "$work/two.ndjson")"
key "$work/blue" "$work/out_swap" --checkpoint "$work/converted.safetensors" 2> "$work/swap.txt" || fail "swap run"
grep -q "swapped" "$work/swap.txt" || fail "no note that the blue clip is keyed swapped"
cmp -s "$work/out_swap/blue/Matte/0001.exr" "$work/out_two/blue/Matte/0001.exr" \
  && fail "the blue model's matte equals the swapped green model's"
echo "cli checkpoints: ok"
