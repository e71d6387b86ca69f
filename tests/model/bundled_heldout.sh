#!/usr/bin/env bash
# The bundled model's promise (checkpoints/README.md), checked end to end at the CLI's
# defaults: held-out-family frames (plants over panel screens, never trained on) as an sRGB
# PNG clip and a scene-linear EXR clip, keyed by `corridorkey-engine inference` with no
# model options, scored against the true alpha by tools/evaluate.py. Fails unless the
# model's alpha MSE is <= 0.5x the hint's and below the fitted chroma key's.
# Then the draft profile on the same clips: its MSE must stay <= 1.3x the full-size MSE.
#   bundled_heldout.sh CLI PYTHON SOURCE_DIR WORK_DIR
set -euo pipefail
cli=$1 py=$2 src=$3 work=$4
frames=${CK_HELDOUT_FRAMES:-16}
rm -rf "$work"
"$py" "$src/tools/evaluate.py" --make-heldout "$work" --frames "$frames" --size 640x360
"$cli" inference "$work/heldout_srgb" --quiet
"$cli" inference "$work/heldout_linear" --linear --quiet
"$py" "$src/tools/evaluate.py" --engine --clip "$work/heldout_srgb" --clip "$work/heldout_linear" \
    --json "$work/metrics.json"
"$py" - "$work/metrics.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))["pooled"]["heldout"]["metrics"]
model, hint, key = m["model"]["mse"], m["hint"]["mse"], m["chroma_key"]["mse"]
print(f"held-out alpha MSE: model {model:.5f}, hint {hint:.5f} ({model / hint:.2f}x), "
      f"chroma key {key:.5f} ({model / key:.2f}x)")
ok = model <= 0.5 * hint and model < key
print("bundled held-out: ok" if ok else "bundled held-out: FAILED (target: <= 0.5x hint, < chroma key)")
sys.exit(0 if ok else 1)
PY
# The draft profile (backbone at half of img_size: 192 for the bundled model's 384) ships
# because its held-out alpha MSE stays <= 1.3x the full-size MSE (docs/profiles.md "Draft").
# The draft runs at the precision the full-size run used (its run.json): the two are planned
# apart (different plan keys), and on a CPU whose trials and flag rule disagree they could
# otherwise run at different precisions, which the 1.3x bound does not state.
precision=$("$py" -c "import json,sys; print(json.load(open(sys.argv[1]))['precision'])" "$work/heldout_srgb/Output/run.json")
echo "full-size precision: $precision (the draft runs at it)"
"$cli" inference "$work/heldout_srgb" --profile draft --precision "$precision" --output-root "$work/draft" --quiet
"$cli" inference "$work/heldout_linear" --linear --profile draft --precision "$precision" --output-root "$work/draft" --quiet
"$py" "$src/tools/compare_mattes.py" --clip "$work/heldout_srgb" --clip "$work/heldout_linear" \
    --run full=inplace --run draft="$work/draft" --metrics mse --json "$work/draft.json"
"$py" - "$work/draft.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["pooled"]["draft"]["ratio_to_first"]["mse"]
print(f"draft held-out alpha MSE: {r:.3f}x the full-size MSE")
print("bundled draft: ok" if r <= 1.3 else "bundled draft: FAILED (target: <= 1.3x full size)")
sys.exit(0 if r <= 1.3 else 1)
PY
echo "bundled held-out and draft: ok"
