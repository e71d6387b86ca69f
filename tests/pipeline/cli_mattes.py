#!/usr/bin/env python3
"""Garbage and holdout mattes through the real binary (docs/clips.md, "Garbage and holdout
mattes"), on a clip of our own making: a green-screen plate with a grey rig (a C-stand) at
its left edge that a generated hint keys as foreground.

- `inference` with GarbageMatte/ (one 16-bit PNG per frame) and HoldoutMatte/ (one 8-bit RGB
  PNG for every frame): Matte and Processed's alpha exactly 0 under the garbage matte and
  exactly 1 under the holdout, the rig gone from Comp; without the mattes the bundled model
  keys the rig as foreground (so the test shows the mattes doing it).
- The garbage matte multiplies the hint: the matted run equals a run whose hint file is the
  generated hint x (1 - garbage), with the formula applied to its matte.
- The same mattes given as `--garbage-matte DIR --holdout-matte FILE`, and as a job's
  `garbage_matte` / `holdout_matte` in a `job run` chunk: byte-identical Matte files.
- A job's relative matte paths are the job file's, whatever folder it runs from.
- Errors: a matte of another size names the file; a folder with more mattes than frames
  names it, and `--allow-mismatch` keys with a warning; an empty GarbageMatte/ names it.
- An overscan EXR plate: an EXR garbage matte with the plate's windows covers the overscan,
  a display-sized PNG holdout is placed on the display window.

  cli_mattes.py CLI WORKDIR SOURCE_DIR     (CK_MAKE_CLIP: the test clip generator)
"""
import glob
import json
import os
import shutil
import subprocess
import sys

import cv2
import numpy as np
import OpenEXR

cli, work, src = sys.argv[1], sys.argv[2], sys.argv[3]
# The bundled trained model at its own size: it keys a grey rig on green as foreground, which
# a random one would not show. float32 so two runs compare at the output's rounding only.
ckpt = os.path.join(src, "checkpoints", "greenformer_small_synthetic384.ts")
model = ["--checkpoint", ckpt, "--device", "cpu", "--profile", "original", "--precision", "float32"]
W, H, N = 320, 180, 2
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
failures = []


def fail(msg):
    print("FAIL:", msg)
    failures.append(msg)


def check(ok, msg):
    if not ok:
        fail(msg)


def run(args, expect=0):
    p = subprocess.run([cli] + args, capture_output=True, text=True)
    if p.returncode != expect:
        fail(f"{' '.join(args)}: exit {p.returncode}, expected {expect}: {(p.stderr + p.stdout)[-1200:]}")
    return p


def read_exr(path):
    """The EXR's channels by name as float32 arrays (OpenEXR's own reader)."""
    with OpenEXR.File(path) as f:
        ch = f.channels()
        out = {}
        for name, c in ch.items():
            px = np.asarray(c.pixels, dtype=np.float32)
            if px.ndim == 3:  # a packed RGB(A) channel group
                for i, n in enumerate(name.split(",") if "," in name else list("RGBA")[: px.shape[2]]):
                    out[n] = px[:, :, i]
            else:
                out[name] = px
        return out


def matte_of(clip_out, stem):
    m = read_exr(os.path.join(clip_out, "Matte", stem + ".exr"))
    return next(iter(m.values())) if len(m) == 1 else m["A"]


# ---- the clip: the generator's plates, a grey rig painted at the left edge -----------------
gen = os.path.join(work, "gen")
subprocess.run([os.environ["CK_MAKE_CLIP"], gen, "--frames", str(N), "--size", f"{W}x{H}", "--plate", "png",
                "--hint", "none"], check=True)
clip = os.path.join(work, "clip")
os.makedirs(os.path.join(clip, "Input"))
stems = []
for i, f in enumerate(sorted(os.listdir(os.path.join(gen, "Input")))):
    plate = cv2.imread(os.path.join(gen, "Input", f), cv2.IMREAD_UNCHANGED)
    plate[:, 12:34] = (118, 124, 130)  # the rig: a grey stand, on the green, full height
    plate[20:28, 12:60] = (90, 90, 96)  # and its arm
    cv2.imwrite(os.path.join(clip, "Input", f), plate)
    stems.append(os.path.splitext(f)[0])

# Garbage: the rig's region, white, with a grey soft edge the final matte keeps as it is.
garbage = np.zeros((H, W), np.float32)
garbage[:, 4:40] = 1.0
garbage[14:34, 4:66] = 1.0
garbage[:, 40:44] = 0.5  # the soft edge: alpha x 0.5 there
# Holdout: the centre of the subject (the generator's subject is centred).
holdout = np.zeros((H, W), np.float32)
holdout[70:110, 140:180] = 1.0
g_is1, h_is1 = garbage == 1.0, holdout == 1.0
g16 = np.round(garbage * 65535).astype(np.uint16)  # 0.5 -> 32768: keyed as 32768/65535
g_keyed = g16.astype(np.float32) / 65535
os.makedirs(os.path.join(clip, "GarbageMatte"))
for s in stems:
    cv2.imwrite(os.path.join(clip, "GarbageMatte", s + ".png"), g16)  # 16-bit grey, one per frame
os.makedirs(os.path.join(clip, "HoldoutMatte"))
h8 = (holdout * 255).astype(np.uint8)
cv2.imwrite(os.path.join(clip, "HoldoutMatte", "holdout.png"), cv2.merge([h8, h8, h8]))  # RGB, every frame

# ---- 1. inference with the clip's folders ---------------------------------------------------
out1 = os.path.join(work, "out_folders")
run(["inference", clip, "--output-root", out1, "--outputs", "matte,processed,comp", "--quiet"] + model)
out1 = os.path.join(out1, "clip")
# ... and the same plates without mattes: the model keys the rig as foreground.
plain = os.path.join(work, "plain")
os.makedirs(plain)
shutil.copytree(os.path.join(clip, "Input"), os.path.join(plain, "Input"))
out0 = os.path.join(work, "out_plain")
run(["inference", plain, "--output-root", out0, "--outputs", "matte", "--quiet"] + model)
out0 = os.path.join(out0, "plain")

rig = np.zeros((H, W), bool)
rig[:, 12:34] = True
for s in stems:
    a0 = matte_of(out0, s)
    check(a0[rig].mean() > 0.5, f"{s}: without mattes the rig keys to {a0[rig].mean():.3f}; the test "
                                f"needs a rig the model keys as foreground")
    a = matte_of(out1, s)
    check(np.all(a[g_is1] == 0.0), f"{s}: Matte under garbage 1 is not exactly 0 (max {a[g_is1].max()})")
    check(np.all(a[h_is1] == 1.0), f"{s}: Matte under holdout 1 is not exactly 1 (min {a[h_is1].min()})")
    edge = a[:, 40:44]
    check(edge.max() <= 0.5 + 1e-3, f"{s}: Matte under the garbage's 0.5 edge exceeds 0.5 ({edge.max()})")
    p = read_exr(os.path.join(out1, "Processed", s + ".exr"))
    check(np.all(p["A"][g_is1] == 0.0) and np.all(p["R"][g_is1] == 0.0),
          f"{s}: Processed under garbage 1 is not exactly transparent black")
    check(np.all(p["A"][h_is1] == 1.0), f"{s}: Processed alpha under holdout 1 is not exactly 1")
    comp = cv2.imread(os.path.join(out1, "Comp", s + ".png"), cv2.IMREAD_UNCHANGED)
    # Alpha 0: Comp is the checkerboard alone, two tones, no rig grey.
    tones = np.unique(comp[g_is1].reshape(-1, comp.shape[2]), axis=0)
    check(len(tones) <= 2, f"{s}: Comp under garbage 1 holds {len(tones)} colours, not the checker's two")

# run.json says which mattes keyed the clip.
with open(os.path.join(out1, "run.json")) as f:
    rj = json.load(f)
check(rj.get("mattes") == {"garbage": os.path.join(clip, "GarbageMatte"),
                           "holdout": os.path.join(clip, "HoldoutMatte", "holdout.png")},
      f"run.json mattes: {rj.get('mattes')}")

# ---- 2. the garbage matte multiplies the hint ----------------------------------------------
# The generated hint written in Output/AlphaHint is the one before the garbage matte; keyed
# from a file as hint x (1 - garbage) (float EXR: exact), with no mattes, then the formula:
# the same matte up to the Matte EXR's half rounding, applied on both sides (tolerance 1e-3).
hinted = os.path.join(work, "hinted")
shutil.copytree(os.path.join(clip, "Input"), os.path.join(hinted, "Input"))
os.makedirs(os.path.join(hinted, "AlphaHint"))
for s in stems:
    gen_hint = cv2.imread(os.path.join(out1, "AlphaHint", s + ".png"), cv2.IMREAD_UNCHANGED)
    check(gen_hint is not None, f"{s}: no generated hint written")
    h = gen_hint.astype(np.float32) / 255 * (1 - g_keyed)
    hdr = OpenEXR.File({"compression": OpenEXR.ZIP_COMPRESSION, "type": OpenEXR.scanlineimage},
                       {"Y": h.astype(np.float32)})
    hdr.write(os.path.join(hinted, "AlphaHint", s + ".exr"))
out2 = os.path.join(work, "out_hinted")
run(["inference", hinted, "--output-root", out2, "--outputs", "matte", "--hint", "files", "--quiet"] + model)
out2 = os.path.join(out2, "hinted")
hold_keyed = h8.astype(np.float32) / 255
for s in stems:
    want = np.maximum(matte_of(out2, s) * (1 - g_keyed), hold_keyed)
    diff = np.abs(matte_of(out1, s) - want).max()
    check(diff <= 1e-3, f"{s}: matted run differs from hint x (1 - garbage) + formula by {diff}")

# ---- 3. flags and job keys give the same files ---------------------------------------------
bare = os.path.join(work, "bare")
shutil.copytree(os.path.join(clip, "Input"), os.path.join(bare, "Input"))
out3 = os.path.join(work, "out_flags")
run(["inference", bare, "--output-root", out3, "--outputs", "matte", "--quiet",
     "--garbage-matte", os.path.join(clip, "GarbageMatte"),
     "--holdout-matte", os.path.join(clip, "HoldoutMatte", "holdout.png")] + model)
with open(os.path.join(out3, "bare", "run.json")) as f:
    check(json.load(f).get("mattes", {}).get("holdout") == os.path.join(clip, "HoldoutMatte", "holdout.png"),
          "run.json of the flags' run: no holdout file")
with open(os.path.join(out0, "run.json")) as f:
    check(json.load(f).get("mattes") == {"garbage": None, "holdout": None}, "run.json without mattes: not null")
for s in stems:
    a, b = (open(os.path.join(o, "Matte", s + ".exr"), "rb").read()
            for o in (out1, os.path.join(out3, "bare")))
    check(a == b, f"{s}: --garbage-matte/--holdout-matte Matte differs from the clip folders'")

root = os.path.join(work, "jobclips")
shutil.copytree(os.path.join(clip, "Input"), os.path.join(root, "shot", "Input"))
with open(os.path.join(work, "job.yaml"), "w") as f:
    f.write(f"""version: 1
name: mattes
clips_root: jobclips
profile: original
checkpoint: {ckpt}
device: cpu
outputs: [matte]
garbage_matte: clip/GarbageMatte
holdout_matte: clip/HoldoutMatte/holdout.png
""")
# Relative to the job file, as its clips are, whatever folder a farm task starts in.
p = subprocess.run([cli, "job", "run", os.path.join(work, "job.yaml"), "--chunk", "1/1", "--precision", "float32",
                    "--quiet"], capture_output=True, text=True, cwd="/")
check(p.returncode == 0, f"job run from /: exit {p.returncode}: {(p.stderr + p.stdout)[-800:]}")
for s in stems:
    got = os.path.join(root, "shot", "Output", "Matte", s + ".exr")
    if not os.path.exists(got):
        fail(f"job run: no {got}")
        continue
    check(open(got, "rb").read() == open(os.path.join(out1, "Matte", s + ".exr"), "rb").read(),
          f"{s}: job run's Matte with garbage_matte/holdout_matte differs from inference's")

# job validate and job plan resolve the mattes as a chunk does: a missing one fails there.
p = run(["job", "validate", os.path.join(work, "job.yaml")])
check(": ok:" in p.stdout, f"job validate: {p.stdout[-300:]}")
with open(os.path.join(work, "job.yaml")) as f:
    text = f.read()
with open(os.path.join(work, "job_missing.yaml"), "w") as f:
    f.write(text.replace("clip/GarbageMatte", "clip/NoSuchMatte").replace("name: mattes", "name: missing"))
for sub in ("validate", "plan"):
    p = run(["job", sub, os.path.join(work, "job_missing.yaml")], expect=3)
    check("NoSuchMatte" in p.stderr + p.stdout, f"job {sub}: a missing garbage_matte not named: {p.stderr[-300:]}")

# ---- 4. errors name the file ---------------------------------------------------------------
bad = os.path.join(work, "bad")
shutil.copytree(os.path.join(clip, "Input"), os.path.join(bad, "Input"))
os.makedirs(os.path.join(bad, "GarbageMatte"))
cv2.imwrite(os.path.join(bad, "GarbageMatte", "rig.png"), cv2.resize(h8, (W // 2, H // 2)))
p = run(["inference", bad, "--output-root", os.path.join(work, "out_bad"), "--outputs", "matte"] + model, expect=3)
msg = p.stderr + p.stdout
check("GarbageMatte/rig.png" in msg and "160x90" in msg, f"a half-size matte: no error naming it: {msg[-600:]}")
check(not glob.glob(os.path.join(work, "out_bad", "*", "Matte", "*.exr")), "a refused matte left outputs")

many = os.path.join(work, "many")
shutil.copytree(os.path.join(clip, "Input"), os.path.join(many, "Input"))
os.makedirs(os.path.join(many, "GarbageMatte"))
for i in range(N + 1):
    cv2.imwrite(os.path.join(many, "GarbageMatte", f"{i + 1:04d}.png"), g16)
p = run(["inference", many, "--output-root", os.path.join(work, "out_many"), "--outputs", "matte"] + model, expect=3)
msg = p.stderr + p.stdout
check("GarbageMatte" in msg and f"{N + 1} matte frames" in msg, f"more mattes than frames: no error naming them: {msg[-600:]}")
p = run(["inference", many, "--output-root", os.path.join(work, "out_many"), "--outputs", "matte",
         "--allow-mismatch"] + model)
check("using the first" in p.stderr + p.stdout, "--allow-mismatch: no warning for the extra matte")

# An empty GarbageMatte/ (a matte render that never landed) is an error naming it, not an
# unmatted key.
empty = os.path.join(work, "empty")
shutil.copytree(os.path.join(clip, "Input"), os.path.join(empty, "Input"))
os.makedirs(os.path.join(empty, "GarbageMatte"))
p = run(["inference", empty, "--output-root", os.path.join(work, "out_empty"), "--outputs", "matte"] + model, expect=3)
msg = p.stderr + p.stdout
check(os.path.join("empty", "GarbageMatte") in msg and "no image sequence" in msg,
      f"an empty GarbageMatte/: no error naming it: {msg[-600:]}")

# ---- 5. an overscan EXR plate and an EXR matte rendered with its windows -------------------
# The matte covers the overscan too (read by its windows, as the plate is); a display-sized
# PNG leaves the overscan unmatted.
OS = 16
big = cv2.imread(os.path.join(clip, "Input", stems[0] + ".png"), cv2.IMREAD_UNCHANGED)[:, :, ::-1]
big = np.ascontiguousarray(big.astype(np.float32) / 255)  # the data window: W x H
DWW, DWH = W - 2 * OS, H - 2 * OS  # the display window inside it


def windows(extra=None):
    h = {"compression": OpenEXR.ZIP_COMPRESSION, "type": OpenEXR.scanlineimage,
         "dataWindow": (np.array([-OS, -OS], np.int32), np.array([DWW + OS - 1, DWH + OS - 1], np.int32)),
         "displayWindow": (np.array([0, 0], np.int32), np.array([DWW - 1, DWH - 1], np.int32))}
    h.update(extra or {})
    return h


over = os.path.join(work, "over")
os.makedirs(os.path.join(over, "Input"))
os.makedirs(os.path.join(over, "GarbageMatte"))
os.makedirs(os.path.join(over, "HoldoutMatte"))
with OpenEXR.File(windows(), {"RGB": big}) as f:
    f.write(os.path.join(over, "Input", "0001.exr"))
with OpenEXR.File(windows(), {"Y": np.ascontiguousarray(garbage)}) as f:  # the rig, over the overscan
    f.write(os.path.join(over, "GarbageMatte", "0001.exr"))
hold_disp = np.ascontiguousarray(holdout[OS:H - OS, OS:W - OS])  # display-sized: placed on it
cv2.imwrite(os.path.join(over, "HoldoutMatte", "0001.png"), (hold_disp * 255).astype(np.uint8))
out5 = os.path.join(work, "out_over")
run(["inference", over, "--output-root", out5, "--outputs", "matte", "--quiet"] + model)
m = read_exr(os.path.join(out5, "over", "Matte", "0001.exr"))
a = next(iter(m.values()))
check(a.shape == (H, W), f"overscan: Matte is {a.shape}, not the data window's {(H, W)}")
if a.shape == (H, W):
    # Columns 4..15 of the rig's region lie in the overscan (the display window starts at 16).
    check(np.all(a[g_is1] == 0.0), "overscan: Matte under the EXR garbage matte (overscan included) is not 0")
    check(np.all(a[h_is1] == 1.0), "overscan: Matte under the display-sized holdout is not 1")

# A matte folder whose numbering drifts from the plates' is said, as a hint folder's is; a
# flag that sets a clip's own folder aside is said too.
drift = os.path.join(work, "drift")
shutil.copytree(os.path.join(clip, "Input"), os.path.join(drift, "Input"))
os.makedirs(os.path.join(drift, "GarbageMatte"))
for k in (1, 3):  # 0002 missing: plate 0002 would take matte 0003
    cv2.imwrite(os.path.join(drift, "GarbageMatte", f"g.{k:04d}.png"), g16)
p = run(["inference", drift, "--output-root", os.path.join(work, "out_drift"), "--outputs", "matte",
         "--garbage-matte", os.path.join(clip, "GarbageMatte", stems[0] + ".png")] + model)
check("GarbageMatte: ignored, garbage_matte" in p.stderr + p.stdout,
      f"--garbage-matte over a clip's GarbageMatte/: not said: {(p.stderr + p.stdout)[-400:]}")
p = run(["inference", drift, "--output-root", os.path.join(work, "out_drift"), "--outputs", "matte"] + model)
check("numbering drifts" in p.stderr + p.stdout and "g.0003.png" in p.stderr + p.stdout,
      f"a matte folder missing a number: no drift warning: {(p.stderr + p.stdout)[-400:]}")

if failures:
    print(f"cli mattes: {len(failures)} failure(s)")
    sys.exit(1)
print("cli mattes: ok")
